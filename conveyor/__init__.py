"""Conveyor: a durable, push-based task queue for Django.

This package must stay importable without Django configured: ``conveyor.sdk``
lives inside it and imports nothing from Django.
"""

__version__ = "0.1.0"
