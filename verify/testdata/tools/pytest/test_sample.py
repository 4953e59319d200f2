import pytest


def test_passes():
    assert 1 + 1 == 2


def test_fails():
    assert [1, 2] == [1, 3], "lists differ"


@pytest.fixture
def broken_teardown():
    yield 1
    raise RuntimeError("teardown exploded")


def test_fails_and_teardown_errors(broken_teardown):
    assert broken_teardown == 2


def test_teardown_only_errors(broken_teardown):
    assert broken_teardown == 1


@pytest.mark.xfail(reason="known bug 123")
def test_expected_failure():
    assert False


@pytest.mark.skip(reason="needs network")
def test_skipped():
    pass


def test_prints_control_chars():
    print("colour \x1b[31mred\x1b[0m and a bell \x07")
    assert False, "see output \x1b"
