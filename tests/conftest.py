"""Test-wide setup: run every test under gevent's monkey patching, as the harness runs under Locust."""

from gevent import monkey

monkey.patch_all()


def pytest_collection_modifyitems(config: object, items: list) -> None:  # type: ignore[type-arg]
    """Run the real-vLLM tests last, so the vLLM server (started once for them) never shares the CPU with the
    timing-sensitive tests."""
    items.sort(key=lambda it: "tests/real_vllm/" in str(it.path).replace("\\", "/"))
