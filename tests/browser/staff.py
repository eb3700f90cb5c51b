"""Run inside ``manage.py shell``: create staff users and a logged-in session.

Passwords are hashed with few PBKDF2 iterations so creating users and
logging in stay fast (Django upgrades the hash on the first real login).
Prints the session key of the first user.
"""

from __future__ import annotations

import os

from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.sessions.backends.db import SessionStore

hasher = PBKDF2PasswordHasher()
password = os.environ["DASHBOARD_TEST_PASSWORD"]
users = []
for name in os.environ["DASHBOARD_TEST_USERS"].split(","):
    users.append(
        get_user_model().objects.create(
            username=name,
            email=f"{name}@example.com",
            is_staff=True,
            is_superuser=True,
            password=hasher.encode(password, hasher.salt(), iterations=1000),
        )
    )
session = SessionStore()
session[SESSION_KEY] = str(users[0].pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = users[0].get_session_auth_hash()
session.create()
print(session.session_key)
