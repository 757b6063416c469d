"""The service's one error type (adapters turn it into an is_error result or exit code 2)."""
from __future__ import annotations


class ServiceError(ValueError):
    """A request the service cannot serve; the message says what to change."""


class VerificationCancelled(ServiceError):
    """The caller cancelled a verification; its judge and arms were stopped, nothing recorded."""
