"""A model's registration: owner, tier, declared features with lineage, alert policy, routing."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from detectors.policy.persistence import PersistenceConfig
from sdk.record import MAX_FEATURES, MAX_ID_LENGTH
from sdk.registry import FEATURE_TYPES

Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH)]
Label = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class FeatureDeclaration(BaseModel):
    """A feature's declared type and lineage."""

    type: Literal[FEATURE_TYPES] = Field(..., description="numeric, categorical or boolean")
    source: str | None = Field(None, min_length=1, max_length=256,
                               description="Upstream source the feature comes from (lineage)")

    model_config = {"extra": "forbid"}


class ModelConfig(BaseModel):
    """Per-model settings, stored as JSON."""

    window_seconds: int = Field(300, ge=1, le=31 * 86_400, description="Window length, seconds")
    owner: str | None = Field(None, max_length=256, description="Owning team")
    tier: int = Field(2, ge=1, le=3, description="1: business critical, 2: standard, 3: best effort")
    features: dict[Name, FeatureDeclaration] = Field(
        default_factory=dict, max_length=MAX_FEATURES,
        description="Declared features: type and upstream source (lineage)")
    persistence: PersistenceConfig = Field(default_factory=PersistenceConfig,
                                           description="k-of-m persistence and auto-resolve")
    routing: dict[Label, Label] = Field(default_factory=dict, max_length=32,
                                        description="Labels receivers route on (team, channel, ...)")

    def source_of(self, feature: str) -> str | None:
        """The declared upstream source of ``feature`` (None when undeclared)."""
        decl = self.features.get(feature)
        return None if decl is None else decl.source
