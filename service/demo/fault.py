"""The demo's injected fault: an upstream weather feed breaks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class WeatherFeedFault:
    """From ``start`` to ``end`` (Unix s, event time) the weather feed is broken:
    ``null_feature`` arrives empty and ``frozen_feature`` repeats the last value
    it had before the fault, for every model that uses them."""

    start: float
    end: float
    null_feature: str = "visib"
    frozen_feature: str = "wind_speed"

    @property
    def features(self) -> tuple[str, str]:
        return self.null_feature, self.frozen_feature

    def active(self, event_time: np.ndarray) -> np.ndarray:
        return (event_time >= self.start) & (event_time < self.end)

    def apply(self, frame: pd.DataFrame, event_time: np.ndarray) -> pd.DataFrame:
        """Model inputs as the broken feed delivers them (a new frame)."""
        hit = self.active(event_time)
        if not hit.any() or self.null_feature not in frame:
            return frame
        out = frame.copy()
        before = out.loc[~hit & (event_time < self.start), self.frozen_feature].dropna()
        frozen = float(before.iloc[-1]) if len(before) else 0.0
        out.loc[hit, self.null_feature] = np.nan
        out.loc[hit, self.frozen_feature] = frozen
        return out
