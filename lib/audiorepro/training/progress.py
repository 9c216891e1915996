"""What a run prints: a live tqdm bar on a terminal or in an interactive notebook, plain lines
in a log, one closing summary line in a page executed headlessly (``$AUDIOREPRO_HEADLESS``)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

from tqdm.auto import tqdm as tqdm_auto

PROGRESS_MODES = ("auto", "bar", "lines", "summary", "none")
HEADLESS_ENV = "AUDIOREPRO_HEADLESS"  # set by audiorepro.pages while it executes a page


def _stdout_is_tty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _interactive_notebook() -> bool:
    """True inside a Jupyter kernel (where tqdm.auto draws a widget)."""
    if "IPython" not in sys.modules:
        return False
    shell = sys.modules["IPython"].get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _auto_progress() -> str:
    """``bar`` on a terminal or in an interactive notebook, ``summary`` in a page executed
    headlessly (papermill via :mod:`audiorepro.pages`), ``lines`` in logs."""
    if os.environ.get(HEADLESS_ENV):
        return "summary"
    if _stdout_is_tty() or _interactive_notebook():
        return "bar"
    return "lines"


class _Progress:
    """The progress output of one ``fit`` call (main process only).

    ``bar``: a live tqdm bar (terminal, interactive notebook). ``lines``: a plain line every
    ``log_every`` steps and every evaluation (logs). ``summary``: nothing until the run's one
    closing line (a saved notebook, where redraws would pile up). ``none``: silent. In a page
    executed headlessly, ``lines`` is shown as ``summary``.
    """

    def __init__(
        self, mode: str, *, total: int, initial: int, enabled: bool, preamble: Iterable[str] = ()
    ) -> None:
        if mode == "auto":
            mode = _auto_progress()
        elif mode == "lines" and os.environ.get(HEADLESS_ENV):
            mode = "summary"
        self.mode = mode if enabled else "none"
        if self.mode != "none":
            for line in preamble:
                print(line, flush=True)
        self.total = total
        self.bar: Any = None
        self.start = time.perf_counter()
        self.initial = initial
        self.first_loss: float | None = None
        self.last_loss: float | None = None
        if self.mode == "bar":
            self.bar = tqdm_auto(
                total=total, initial=initial, desc="train", unit="step", dynamic_ncols=True
            )

    def print(self, text: str) -> None:
        """A message that does not break the bar (not shown in ``summary`` mode)."""
        if self.mode == "bar":
            self.bar.write(text)
        elif self.mode == "lines":
            print(text, flush=True)

    def step(self, step: int, epoch: int, logs: Mapping[str, float], log_now: bool) -> None:
        """Advance by one step; show ``logs`` every ``log_every`` steps."""
        if "loss" in logs:
            if self.first_loss is None:
                self.first_loss = logs["loss"]
            self.last_loss = logs["loss"]
        if self.mode == "bar":
            self.bar.update(1)
            if log_now:
                self.bar.set_postfix({k: f"{v:.4g}" for k, v in logs.items()}, refresh=False)
            return
        if self.mode != "lines" or not log_now:
            return
        rate = (step - self.initial) / max(time.perf_counter() - self.start, 1e-9)
        values = " | ".join(f"{k} {v:.4g}" for k, v in logs.items())
        width = len(str(self.total))
        print(
            f"step {step:>{width}}/{self.total} | epoch {epoch + 1} | {values} | "
            f"{rate:.2f} step/s",
            flush=True,
        )

    def summary(self, steps: int, epochs: int, seconds: float, stopped_early: bool) -> str:
        """The run's closing line: steps, epochs, time, rate and the loss from first to last."""
        rate = (steps - self.initial) / max(seconds, 1e-9)
        loss = ""
        if self.first_loss is not None and self.last_loss is not None:
            loss = f", loss {self.first_loss:.4g} -> {self.last_loss:.4g}"
        status = " (stopped early)" if stopped_early else ""
        return (
            f"done: {steps} step(s), {epochs} epoch(s) in {seconds:.1f} s "
            f"({rate:.2f} step/s){loss}{status}"
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


__all__ = ["HEADLESS_ENV", "PROGRESS_MODES"]
