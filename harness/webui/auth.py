"""``--web-login`` for the harness's web UI: Locust's login page with one user and password from the environment.

Locust 2.47's ``--web-login`` only turns on Flask-Login (every page then needs a logged-in user); the app's secret
key, the ``user_loader`` and the login form's callback are the locustfile's to set up (Locust docs,
"Authentication"). This module does it: the user is ``LLMLOAD_WEB_USER``, the password ``LLMLOAD_WEB_PASSWORD``
(both required: the process refuses to start without them), the session key ``LLMLOAD_WEB_SECRET`` (optional; a
random one per process otherwise, so a restart logs everyone out). Locust's pages, its ``/swarm`` and ``/stop``,
and the LLM view (``/llm/``, ``/llm/data.json``, downloads) are then behind the login.
"""

from __future__ import annotations

import hmac
import os
import secrets
from typing import Any

__all__ = ["ENV_PASSWORD", "ENV_SECRET", "ENV_USER", "AuthSetupError", "credentials", "install_login"]

ENV_USER = "LLMLOAD_WEB_USER"
ENV_PASSWORD = "LLMLOAD_WEB_PASSWORD"
ENV_SECRET = "LLMLOAD_WEB_SECRET"


class AuthSetupError(Exception):
    """``--web-login`` without the credentials it needs (the message says which variable to set)."""


def credentials(env: dict[str, str] | None = None) -> tuple[str, str]:
    """``(user, password)`` from ``LLMLOAD_WEB_USER`` / ``LLMLOAD_WEB_PASSWORD`` (``env`` defaults to
    :data:`os.environ`).

    Raises:
        AuthSetupError: either is unset or empty.
    """
    env = dict(os.environ) if env is None else env
    user, password = env.get(ENV_USER, ""), env.get(ENV_PASSWORD, "")
    missing = [name for name, v in ((ENV_USER, user), (ENV_PASSWORD, password)) if not v]
    if missing:
        raise AuthSetupError(
            f"--web-login needs {' and '.join(missing)} set (the web UI's user name and password), e.g. "
            f"{ENV_USER}=admin {ENV_PASSWORD}='…' locust -f locustfiles/k26.py --web-login"
        )
    return user, password


def install_login(web_ui: Any, base: str) -> None:
    """Set up Locust's login on ``web_ui`` (a ``locust.web.WebUI`` started with ``--web-login``): secret key,
    user loader and a login form posting to ``<base>/llm/login`` (``base`` is ``--web-base-path`` without the
    trailing ``/``). A wrong user or password goes back to the login page with "Invalid user or password".

    Raises:
        AuthSetupError: the credentials are not set (:func:`credentials`).
    """
    from flask import redirect, request, session, url_for
    from flask_login import UserMixin, login_user

    user, password = credentials()
    app = web_ui.app
    app.secret_key = os.environ.get(ENV_SECRET) or secrets.token_hex(32)

    class _User(UserMixin):  # type: ignore[misc]
        def __init__(self, name: str) -> None:
            self.id = name

    def load_user(user_id: str) -> _User | None:
        return _User(user_id) if hmac.compare_digest(user_id.encode(), user.encode()) else None

    web_ui.login_manager.user_loader(load_user)
    callback = f"{base}/llm/login"
    web_ui.auth_args = {"username_password_callback": callback}

    def login_submit() -> Any:
        name = request.form.get("username", "")
        given = request.form.get("password", "")
        ok_user = hmac.compare_digest(name.encode(), user.encode())
        ok_password = hmac.compare_digest(given.encode(), password.encode())
        if ok_user and ok_password:
            login_user(_User(name))
            return redirect(url_for("locust.index"))
        session["auth_error"] = "Invalid user or password"
        return redirect(url_for("locust.login"))

    app.add_url_rule(callback, "llmload_login", login_submit, methods=["POST"])
