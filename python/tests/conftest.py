"""The hostile battery's mode (hostile/): its option and marker are declared here, where every run over python/tests
or a folder below it reads them; hostile/conftest.py deselects the hostile_full attacks without --hostile-full."""


def pytest_addoption(parser):
    parser.addoption("--hostile-full", action="store_true",
                     help="the hostile battery's full mode: every attack (the default run is its quick subset)")


def pytest_configure(config):
    config.addinivalue_line("markers", "hostile_full: a hostile-battery attack only the full mode runs "
                                       "(--hostile-full, or -m hostile_full for these alone)")
