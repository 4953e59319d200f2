import pytest


@pytest.fixture
def broken_teardown():
    yield 1
    raise RuntimeError("teardown exploded")


def test_passes():
    assert 1 + 1 == 2


def test_teardown_errors(broken_teardown):
    assert broken_teardown == 1
