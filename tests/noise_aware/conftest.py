import pytest

from ._traces import simulate_traces


@pytest.fixture(scope="package")
def traces():
    return simulate_traces(150)
