"""Test-wide setup: run every test under gevent's monkey patching, as the harness runs under Locust."""

from gevent import monkey

monkey.patch_all()
