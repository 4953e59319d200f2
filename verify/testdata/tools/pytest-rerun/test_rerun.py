import os


def test_flaky(tmp_path_factory):
    # Fails on the first run, passes on the rerun (a marker file in a fixed directory).
    marker = os.path.join(os.environ["RERUN_DIR"], "ran")
    if not os.path.exists(marker):
        open(marker, "w").close()
        assert False, "connection reset"


def test_stable():
    assert True
