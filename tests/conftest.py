"""Fixtures shared by several test modules."""
import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module: on 2 cores shared with other jobs, a second thread mostly waits
    (5x slower here)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(config, items):
    """The book build (tests/test_book.py, minutes, one process) first: with two xdist workers taking
    whole files in collection order, it then runs beside every other file instead of after them."""
    items.sort(key=lambda item: item.path.name != "test_book.py")
