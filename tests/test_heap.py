"""The process's heap (``topicpulse.heap``): with the arenas capped, threads that allocate at
once share them, and trimming is available where glibc is; the GIL is handed over sooner."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from topicpulse import heap

glibc = pytest.mark.skipif(heap._libc() is None, reason="not glibc: nothing to cap or trim")

THREADS = textwrap.dedent(
    """
    import ctypes, sys, threading
    from topicpulse import heap
    if sys.argv[1] != "0":
        assert heap.limit_arenas(int(sys.argv[1]))
    together = threading.Barrier(8)
    def allocate():
        kept = [ctypes.create_string_buffer(200_000) for _ in range(20)]
        together.wait()  # every thread holds its memory at the same time
    threads = [threading.Thread(target=allocate) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ctypes.CDLL(None).malloc_stats()  # one "Arena n:" section per arena, on stderr
    """
)


def arenas(cap: int) -> int:
    done = subprocess.run(
        [sys.executable, "-c", THREADS, str(cap)], capture_output=True, text=True, check=True
    )
    return sum(1 for line in done.stderr.splitlines() if line.startswith("Arena "))


@glibc
def test_capped_arenas_are_shared_by_threads_that_allocate_at_once() -> None:
    assert arenas(2) <= 2
    assert arenas(1) == 1


@glibc
def test_trim_runs() -> None:
    assert heap.trim()


def test_the_bot_hands_the_interpreters_lock_over_sooner() -> None:
    code = "import sys; from topicpulse import heap; heap.favour_replies()"
    code += "; print(sys.getswitchinterval())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout) == pytest.approx(heap.SWITCH_INTERVAL)
    assert heap.SWITCH_INTERVAL < 0.005  # (Python's own)
