"""bench/bench_isolation.py says when a run did not measure the case issue 59 asks for (the busy source's batches
longer than the window): on a faster machine the same --ratio gave 0.66 s batches in a 1 s window, and the ratios then
measured a busy source that left the cores idle a third of each window, with nothing saying so."""

from bench.bench_isolation import busy_case_missed


def test_a_busy_source_slower_than_the_window_is_the_case_measured():
    assert busy_case_missed(1.13, 1) is None


def test_a_busy_source_within_the_window_is_named_with_its_figure_and_the_way_out():
    message = busy_case_missed(0.66, 1)
    assert message is not None and "0.66 s" in message and "1 s window" in message and "--ratio" in message
    assert busy_case_missed(1.0, 1) is not None  # as long as the window is not longer


def test_a_busy_source_without_batches_to_judge_is_named():
    assert "fewer than two batches" in busy_case_missed(None, 1)
