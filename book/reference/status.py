# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Status of this build
#
# *How long each page of this book took to execute, what the speed benchmarks measured, and
# how many tests guard the library: read from the build, not written by hand.*
#
# A README that quotes timings goes stale the day the code changes. This page is executed with
# the rest of the book, so what it shows is what the build and the committed benchmark records
# hold at that moment.
#
# In this notebook we will
#
# - read the page times that the book build writes after every page
#   (`_build/page_times.json`), per page and per chapter;
# - show the benchmark records `make bench` committed (`bench/results/`), with when, where and
#   at which commit each was produced;
# - count the test suite without running it.

# %% tags=["parameters"]
preset: str = "embedded"  # smoke | embedded | paper

# %%
import pandas as pd
from IPython.display import display

from audiorepro import reporting

pd.set_option("display.max_colwidth", None)

# %% [markdown]
# ## Page times
#
# `python -m audiorepro.pages build` (the first half of `make book`) writes each page's
# execution time to `_build/page_times.json` after the page has run, so during a build this
# page sees the pages before it; run on its own, it shows what the last build left. Times
# depend on the machine and on the preset the build ran under. `make book` runs two chapters
# side by side (`--jobs 2`), so its wall time is less than the sum below, and a page's time
# includes the cores it shared with the chapter beside it.

# %%
times = reporting.page_times()
if times is None:
    print("No _build/page_times.json here: no book build has run.")
else:
    by_chapter = times.groupby("chapter", sort=False)["seconds"].sum()
    minutes = times.seconds.sum() / 60
    print(f"{len(times)} pages, {minutes:.1f} minutes of page time")
    display(by_chapter.round(1).to_frame("seconds"))
    display(times.round(1))

# %% [markdown]
# ## Benchmarks
#
# `make bench` runs every `bench/bench_*.py` through `bench/record.py`, which keeps the
# bench's printed figures in `bench/results/<bench>.json` with the date, the commit and the
# machine. The benches compare each fast path against a straightforward reference computed in
# the same run, so a ratio means more than an absolute time on a shared machine.

# %%
benches = reporting.bench_records()
if not benches:
    print(
        "No benchmark record is committed yet: `make bench` writes one "
        "per bench into bench/results/."
    )
else:
    display(
        pd.DataFrame(
            [
                {
                    "bench": b["bench"],
                    "produced": b["produced"],
                    "commit": b["git_sha"],
                    "cpus": b["machine"]["cpus"],
                    "seconds": b["seconds"],
                }
                for b in benches
            ]
        )
    )
    for b in benches:
        print(f"== {b['command']} ({b['produced']})\n{b['output']}")

# %% [markdown]
# ## Tests
#
# `make test` runs the unit tests, the brute-force metric references and every page of this
# book under `preset="smoke"`. Counted here from the source with `ast` (importing the suite
# would take longer than this page): a test parametrized over a computed list, such as every
# book page, counts once, so the number of cases is a lower bound.

# %%
suite = reporting.count_tests()
print(
    f"{suite['functions']} test functions in {suite['files']} files, "
    f"at least {suite['cases']} cases ({suite['computed']} functions "
    "parametrized over a computed list)"
)

# %% [markdown]
# In this notebook we have
#
# - read this build's page times, per page and per chapter, from `_build/page_times.json`;
# - shown the committed benchmark records, each with its date, commit and machine;
# - counted the test suite from its source.
