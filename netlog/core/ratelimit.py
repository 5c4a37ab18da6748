"""
A token bucket: at most C{rate} events a second on average, C{burst} at once.
Pure: the caller hands in the time. The one netlog has: the API's door
counts the sessions it makes with it, an HTTP/2 connection the browser's
stream resets and control frames.
"""

from __future__ import annotations


class TokenBucket:
    """
    Allows C{rate} events a second, and up to C{burst} in a row after a
    quiet spell.
    """

    __slots__ = ("rate", "burst", "_tokens", "_at")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a rate above 0 and a burst of 1 or more, got {rate} and {burst}")
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._at = now

    def allow(self, now: float) -> bool:
        """
        Whether an event at C{now} is allowed (it then counts).
        """
        if now > self._at:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    def wait(self, now: float) -> float:
        """
        Seconds from C{now} until an event would be allowed.
        """
        tokens = min(self.burst, self._tokens + max(0.0, now - self._at) * self.rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate
