"""Work run in several threads at once, for tests of limits on what runs concurrently."""

from __future__ import annotations

import threading
from collections.abc import Callable


def raised_in_threads(work: Callable[[], object], times: int) -> list[Exception]:
    """`work` in `times` threads started together; what they raised, once all have ended (an
    exception inside a thread would otherwise never reach the test)."""
    raised: list[Exception] = []

    def run() -> None:
        try:
            work()
        except Exception as error:  # noqa: BLE001 - collected for the test's assertion
            raised.append(error)

    threads = [threading.Thread(target=run) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return raised
