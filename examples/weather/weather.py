"""The tools of the weather soul (examples/weather/weather.yaml): plain Python functions.

They answer from a small table rather than a web service, so the example runs offline."""

from __future__ import annotations

import asyncio

SKIES = {"oslo": "light snow, -3 °C", "lisbon": "sunny, 19 °C", "tokyo": "rain, 12 °C"}


def forecast(city: str, days: int = 1) -> dict:
    """The weather forecast for a city.

    Args:
        city: the city's name, e.g. Oslo
        days: how many days ahead (1-7)
    """
    sky = SKIES.get(city.strip().lower())
    if sky is None:
        raise LookupError(f"no forecast for {city!r}; known cities: {', '.join(sorted(SKIES))}")
    return {"city": city, "days": days, "sky": sky}


async def local_time(city: str) -> str:
    """The local time in a city, as HH:MM."""
    await asyncio.sleep(0)  # an async tool is awaited, under its timeout
    return {"oslo": "09:12", "lisbon": "08:12", "tokyo": "17:12"}.get(city.strip().lower(), "unknown")
