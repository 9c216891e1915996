"""Frame distances and path-normalised DTW against references written here."""

import itertools
import math

import numpy as np
import pytest

from audiorepro.metrics.dtw import (
    STRIP_WIDTH,
    dtw,
    dtw_distance,
    frame_distances,
    pairwise_dtw,
    pairwise_dtw_both,
    partner_dtw,
)


def ref_angular(a, b):
    out = np.empty((len(a), len(b)))
    for i, j in itertools.product(range(len(a)), range(len(b))):
        na, nb = math.sqrt(sum(v * v for v in a[i])), math.sqrt(sum(v * v for v in b[j]))
        if na == 0 or nb == 0:
            out[i, j] = 0.0 if na == nb else 1.0
        else:
            c = sum(x * y for x, y in zip(a[i], b[j], strict=True)) / (na * nb)
            out[i, j] = math.acos(max(-1.0, min(1.0, c))) / math.pi
    return out


def ref_kl(a, b):
    def smooth(row):
        p = [v / sum(row) + np.finfo(float).eps for v in row]
        return [v / sum(p) for v in p]

    out = np.empty((len(a), len(b)))
    for i, j in itertools.product(range(len(a)), range(len(b))):
        p, q = smooth(a[i]), smooth(b[j])
        kl_pq = sum(x * math.log(x / y) for x, y in zip(p, q, strict=True))
        kl_qp = sum(y * math.log(y / x) for x, y in zip(p, q, strict=True))
        out[i, j] = 0.5 * (kl_pq + kl_qp)
    return out


def ref_dtw(d, normalized=True):
    """Literal transcription of the recurrence and the backtracking rule of ABXpy's _dtw."""
    n, m = len(d), len(d[0])
    cost = [[0.0] * m for _ in range(n)]
    for i in range(n):
        for j in range(m):
            if i == 0 and j == 0:
                cost[i][j] = d[0][0]
            elif i == 0:
                cost[i][j] = d[i][j] + cost[i][j - 1]
            elif j == 0:
                cost[i][j] = d[i][j] + cost[i - 1][j]
            else:
                best = min(cost[i - 1][j], cost[i - 1][j - 1], cost[i][j - 1])
                cost[i][j] = d[i][j] + best
    if not normalized:
        return cost[-1][-1]
    i, j, length = n - 1, m - 1, 1
    while i > 0 and j > 0:
        up, left, diag = cost[i - 1][j], cost[i][j - 1], cost[i - 1][j - 1]
        if diag <= left and diag <= up:
            i, j = i - 1, j - 1
        elif left <= up:
            j -= 1
        else:
            i -= 1
        length += 1
    return cost[-1][-1] / (length + i + j)


def all_path_costs(d):
    """Every monotone warping path from (0, 0) to (n-1, m-1): (total cost, number of cells)."""
    n, m = d.shape
    out = []

    def walk(i, j, total, cells):
        total += d[i, j]
        if (i, j) == (n - 1, m - 1):
            out.append((total, cells + 1))
            return
        for di, dj in ((1, 0), (0, 1), (1, 1)):
            if i + di < n and j + dj < m:
                walk(i + di, j + dj, total, cells + 1)

    walk(0, 0, 0.0, 0)
    return out


def test_angular_matches_reference_with_zero_vectors_and_clipping():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 4))
    b = rng.normal(size=(3, 4))
    a[1] = 0.0
    b[2] = 0.0
    b[0] = 3.0 * a[0]  # cosine 1 up to rounding, distance 0
    got = frame_distances(a, b)
    np.testing.assert_allclose(got, ref_angular(a.tolist(), b.tolist()), atol=1e-7)
    assert got[1, 2] == 0.0  # zero vs zero
    assert got[1, 0] == 1.0 and got[0, 2] == 1.0  # zero vs non-zero
    assert 0.0 <= got[0, 0] < 1e-7
    assert frame_distances(a[:1], -a[:1])[0, 0] == pytest.approx(1.0)
    np.testing.assert_array_equal(frame_distances(a, b, "cosine"), got)


def test_angular_hand_values():
    a = np.array([[1.0, 0.0]])
    b = np.array([[0.0, 2.0], [1.0, 1.0], [-1.0, 0.0]])
    np.testing.assert_allclose(frame_distances(a, b), [[0.5, 0.25, 1.0]], atol=1e-12)


def test_kl_matches_reference_and_is_symmetric():
    rng = np.random.default_rng(1)
    a = rng.random((4, 6))
    b = rng.random((3, 6))
    b[1, 2] = 0.0  # the epsilon keeps the log finite
    got = frame_distances(a, b, "kl")
    np.testing.assert_allclose(got, ref_kl(a.tolist(), b.tolist()), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got, frame_distances(b, a, "kl").T, rtol=1e-12)
    assert frame_distances(a[:1], a[:1], "kl")[0, 0] == pytest.approx(0.0, abs=1e-12)


def test_kl_of_negative_features_is_nan_and_dtw_is_nan():
    a = np.array([[0.5, -0.5, 1.0], [1.0, 2.0, 3.0]])
    b = np.array([[1.0, 1.0, 1.0]])
    assert np.isnan(frame_distances(a, b, "kl")[0, 0])
    assert math.isnan(dtw_distance(a, b, "kl"))


def test_euclidean():
    a = np.array([[0.0, 0.0], [1.0, 1.0]])
    b = np.array([[3.0, 4.0]])
    np.testing.assert_allclose(frame_distances(a, b, "euclidean"), [[5.0], [math.sqrt(13.0)]])


def test_dtw_hand_computed_with_ties():
    # cost = [[1, 1, 1], [1, 1, 1]]; at (1, 2) up, left and diag all tie at 1: the rule takes
    # the diagonal to (0, 1), then one step along the edge: path of 3 cells, 1/3.
    # Preferring up would give 4 cells (1/4), preferring left 3 cells via (1, 1).
    d = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert dtw(d) == pytest.approx(1.0 / 3.0)
    assert dtw(d, normalized=False) == 1.0
    # Transposed: at (2, 1) the diagonal ties again, then one step up: also 3 cells.
    assert dtw(d.T) == pytest.approx(1.0 / 3.0)


def test_dtw_left_before_up_and_asymmetry():
    # cost = [[2, 3, 3, 4], [4, 3, 5, 4], [6, 3, 4, 4]]. At (2, 3): up 4, left 4, diag 5 -> the
    # left/up tie goes left to (2, 2); there diag 3 <= left 3 < up 5 -> (1, 1); diag 2 -> (0, 0):
    # 4 cells, 4/4. Preferring up would go (1, 3) -> (0, 2) -> 2 edge steps: 5 cells, 4/5.
    d = np.array([[2.0, 1.0, 0.0, 1.0], [2.0, 1.0, 2.0, 1.0], [2.0, 0.0, 1.0, 0.0]])
    assert dtw(d, normalized=False) == 4.0
    assert dtw(d) == 1.0
    # Transposing swaps the roles of left and up, so the same tie now goes the other way.
    assert dtw(d.T) == pytest.approx(0.8)


def test_dtw_matches_transcription_on_tie_heavy_random_matrices():
    rng = np.random.default_rng(2)
    asymmetric = 0
    for _ in range(400):
        n, m = rng.integers(1, 6, size=2)
        d = rng.integers(0, 3, size=(n, m)).astype(float)
        for normalized in (True, False):
            assert dtw(d, normalized) == ref_dtw(d.tolist(), normalized)
        asymmetric += dtw(d) != dtw(d.T)
    assert asymmetric > 0  # the tie-breaking really is order-dependent on some of these


def test_dtw_unnormalised_is_minimum_over_all_paths_and_normalised_uses_an_optimal_path():
    rng = np.random.default_rng(3)
    for _ in range(60):
        n, m = rng.integers(1, 5, size=2)
        d = rng.random((n, m))
        paths = all_path_costs(d)
        best = min(c for c, _ in paths)
        assert dtw(d, normalized=False) == pytest.approx(best)
        lengths = {cells for c, cells in paths if math.isclose(c, best)}
        assert any(dtw(d) == pytest.approx(best / cells) for cells in lengths)


def test_dtw_edge_cases():
    assert dtw(np.array([[0.7]])) == 0.7
    assert dtw(np.zeros((0, 3))) == math.inf
    assert dtw(np.zeros((0, 0))) == 0.0
    assert math.isnan(dtw(np.array([[0.0, np.nan]])))
    assert dtw_distance(np.zeros((0, 2)), np.ones((2, 2))) == math.inf
    with pytest.raises(ValueError, match="matrix"):
        dtw(np.zeros(3))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="distance must be one of"):
        frame_distances(np.ones((1, 2)), np.ones((1, 2)), "manhattan")
    with pytest.raises(ValueError, match="dimensions differ"):
        frame_distances(np.ones((1, 2)), np.ones((1, 3)))
    with pytest.raises(ValueError, match="both must have shape"):
        pairwise_dtw_both(np.ones((3, 2)), np.array([0, 1, 3]), np.array([[0, 1]]), np.ones(2))
    with pytest.raises(ValueError, match="offsets"):
        pairwise_dtw(np.ones((3, 2)), np.array([0, 2]), np.array([[0, 0]]))
    with pytest.raises(ValueError, match="pairs index"):
        pairwise_dtw(np.ones((3, 2)), np.array([0, 1, 3]), np.array([[0, 2]]))


@pytest.mark.parametrize("distance", ["angular", "kl", "euclidean"])
def test_pairwise_is_bit_identical_to_single_pairs(distance):
    rng = np.random.default_rng(4)
    items = [rng.random((int(k), 5)) for k in rng.integers(1, 7, size=9)]
    items[3][:] = 0.0 if distance != "kl" else items[3]
    items.append(np.eye(5)[[0, 0, 1]])  # one-hot codes: many exact ties
    items.append(np.eye(5)[[0, 1, 1]])
    frames = np.concatenate(items)
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in items])])
    pairs = np.array(list(itertools.product(range(len(items)), repeat=2)))
    got = pairwise_dtw(frames, offsets, pairs, distance)
    want = [dtw_distance(items[i], items[j], distance) for i, j in pairs]
    np.testing.assert_array_equal(got, want)
    want_via_matrix = [dtw(frame_distances(items[i], items[j], distance)) for i, j in pairs]
    np.testing.assert_array_equal(got, want_via_matrix)
    both = pairs[:, 0] < pairs[:, 1]
    d_ij, d_ji = pairwise_dtw_both(frames, offsets, pairs, both, distance)
    np.testing.assert_array_equal(d_ij, want)
    mirrored = [dtw_distance(items[j], items[i], distance) for i, j in pairs[both]]
    np.testing.assert_array_equal(d_ji[both], mirrored)
    assert np.isnan(d_ji[~both]).all()
    # the frame matrices are exactly symmetric, so both orders come from one computation
    for i, j in pairs[:20]:
        np.testing.assert_array_equal(
            frame_distances(items[i], items[j], distance),
            frame_distances(items[j], items[i], distance).T,
        )


def _partner_lists(n_items, pairs):
    """(start, partners) of sorted ``pairs`` grouped by their first item."""
    start = np.searchsorted([a for a, _ in pairs], np.arange(n_items + 1))
    return start, np.array([b for _, b in pairs], dtype=np.int64)


@pytest.mark.parametrize("distance", ["angular", "kl", "euclidean"])
def test_partner_dtw_is_bit_identical_in_both_orders(distance):
    rng = np.random.default_rng(5)
    lengths = [3, 1, 4, 2, 6, 5, 1, 8, 2, 7, 3, 0, STRIP_WIDTH + 7, 3]
    items = [rng.random((k, 6)) for k in lengths]
    if distance == "angular":
        items[2][1] = 0.0  # a zero frame: distance 1 to others, 0 to another zero frame
        items[4][:] = 0.0
    items.append(np.eye(6)[[0, 0, 1, 2]])  # one-hot codes: many exact ties
    items.append(np.eye(6)[[0, 1, 1, 2]])
    if distance == "kl":
        items.append(rng.normal(size=(3, 6)))  # mixed signs: NaN frame distances
    frames = np.concatenate(items)
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in items])])
    n = len(items)
    # pairs a < b, partners in runs and with gaps, more frames than one strip
    pairs = [(a, b) for a, b in itertools.combinations(range(n), 2) if (a + 2 * b) % 5 != 1]
    start, partners = _partner_lists(n, pairs)
    flags = np.array([1 + (a * b) % 3 for a, b in pairs])  # 1, 2 or 3
    d_ab, d_ba = partner_dtw(frames, offsets, start, partners, flags, distance)
    want_ab = [dtw_distance(items[a], items[b], distance) for a, b in pairs]
    want_ba = [dtw_distance(items[b], items[a], distance) for a, b in pairs]
    np.testing.assert_array_equal(d_ab, np.where(flags & 1, want_ab, np.nan))
    np.testing.assert_array_equal(d_ba, np.where(flags & 2, want_ba, np.nan))
    assert np.isnan(want_ab).any() == (distance == "kl")
    # partners in any order: each item's list reversed
    backwards = np.concatenate([np.arange(start[a + 1] - 1, start[a] - 1, -1) for a in range(n)])
    rev_ab, rev_ba = partner_dtw(
        frames, offsets, start, partners[backwards], flags[backwards], distance
    )
    np.testing.assert_array_equal(rev_ab, d_ab[backwards])
    np.testing.assert_array_equal(rev_ba, d_ba[backwards])
    unnormalised, _ = partner_dtw(frames, offsets, start, partners, flags | 1, distance, False)
    want = [dtw(frame_distances(items[a], items[b], distance), False) for a, b in pairs]
    np.testing.assert_array_equal(unnormalised, want)


def test_partner_dtw_arguments_are_checked():
    frames, offsets = np.ones((3, 2)), np.array([0, 1, 3])
    start, partners, flags = np.array([0, 1, 1]), np.array([1]), np.array([3])
    d_ab, d_ba = partner_dtw(frames, offsets, start, partners, flags)
    assert d_ab[0] == d_ba[0] == dtw_distance(frames[:1], frames[1:])
    with pytest.raises(ValueError, match="start must have 3 entries"):
        partner_dtw(frames, offsets, start[:2], partners, flags)
    with pytest.raises(ValueError, match="partners index items 0..1"):
        partner_dtw(frames, offsets, start, np.array([2]), flags)
    with pytest.raises(ValueError, match="flags must have shape"):
        partner_dtw(frames, offsets, start, partners, np.array([1, 1]))
    with pytest.raises(ValueError, match="offsets"):
        partner_dtw(frames, np.array([0, 1, 2]), start, partners, flags)


def test_undefined_frames_names_the_first_frame_a_distance_cannot_read():
    from audiorepro.metrics.dtw import undefined_frames

    x = np.array([[0.2, 0.8], [0.5, -0.1], [0.0, 0.0]])
    assert undefined_frames(x, "kl") == (1, "has a negative value (-0.1)")
    assert undefined_frames(np.abs(x), "kl") == (2, "sums to 0")
    assert undefined_frames(np.abs(x[:2]), "kl") is None
    for distance in ("angular", "cosine", "euclidean"):
        assert undefined_frames(x, distance) is None
    with pytest.raises(ValueError, match="distance must be one of"):
        undefined_frames(x, "dtw")
