"""codegen.worker.side_by_side: the items come back in order, and a worker that finishes an item
takes the next one, so one long item does not hold back the items after it."""

import threading

import pytest

from codegen.worker import side_by_side


def test_results_come_back_in_the_items_order():
    assert side_by_side(["a", "b"], list(range(7)), lambda worker, item: item * item) == [i * i for i in range(7)]


def test_a_free_worker_takes_the_items_a_busy_one_has_not_started():
    # Item 0 finishes only once items 1-3 are done: with a fixed share each (0 and 2 for one
    # worker), item 2 would wait behind item 0 and item 0 would never finish.
    rest_done, lock, done_by = threading.Event(), threading.Lock(), {}

    def work(worker, item):
        if item == 0:
            assert rest_done.wait(timeout=10), "the items after the long one waited for it"
        with lock:
            done_by[item] = worker
            if len(done_by) == 3 and 0 not in done_by:
                rest_done.set()
        return item

    assert side_by_side(["first", "second"], [0, 1, 2, 3], work) == [0, 1, 2, 3]
    assert {done_by[item] for item in (1, 2, 3)} == {"second"}


def test_an_error_in_one_item_reaches_the_caller():
    def work(worker, item):
        if item == 2:
            raise ValueError("item 2")
        return item

    with pytest.raises(ValueError, match="item 2"):
        side_by_side(["a", "b"], [0, 1, 2, 3], work)
