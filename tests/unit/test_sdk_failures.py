"""What the SDK's worker reports of a handler's exception: the error, and the traceback beside it."""

from __future__ import annotations

from conveyor.sdk import Fail, Release, SkipRetry
from conveyor.sdk import protocol as p
from conveyor.sdk.worker import failure_outcome


def raised(exc: BaseException) -> BaseException:
    def handler() -> None:
        raise exc

    try:
        handler()
    except BaseException as caught:
        return caught
    raise AssertionError("not raised")


def test_an_exception_reports_its_type_and_message_with_its_traceback_beside_it():
    outcome, error = failure_outcome(raised(ValueError("no such user")))

    assert (outcome, error) == (p.RETRY, "ValueError: no such user")
    assert error.traceback.startswith("Traceback (most recent call last):")
    assert "in handler" in error.traceback and error.traceback.endswith("ValueError: no such user\n")


def test_skip_retry_and_fail_send_their_traceback_too_and_release_none():
    outcome, error = failure_outcome(raised(SkipRetry("bad input")))
    assert (outcome, error, "in handler" in error.traceback) == (p.SKIP_RETRY, "SkipRetry: bad input", True)
    outcome, error = failure_outcome(raised(Fail("as given")))
    assert (outcome, error, "in handler" in error.traceback) == (p.RETRY, "as given", True)
    assert failure_outcome(raised(Release())) == (p.RELEASED, "")


def test_an_exception_only_returned_by_a_batch_handler_has_no_traceback():
    _outcome, error = failure_outcome(ValueError("per task"))
    assert error == "ValueError: per task" and getattr(error, "traceback", "") == ""
