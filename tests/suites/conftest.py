import pytest
from suites_support import road_test

from vbstore.suites import push_suite


@pytest.fixture
def suite(store):
    return push_suite(store, road_test())[0]
