"""Scale profiles (data in specs/profiles.yaml): the paper's units mapped onto a budget."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import resources

import yaml

from transformer_core.errors import ConfigError
from transformer_core.knobs import DEPTH_KNOBS, WIDTH_KNOBS  # the knob table says what scales


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    width: float
    depth_divisor: int
    steps_factor: float
    train: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    exclude: dict = field(default_factory=dict)  # row label -> why this profile leaves it out

    def scale_model(self, knobs: dict) -> dict:
        """Model knobs in paper units -> knobs at this profile's scale."""
        out = dict(knobs)
        for k in WIDTH_KNOBS + DEPTH_KNOBS:  # checked before scaling: a string, .nan or .inf is the user's error
            v = out.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ConfigError(f"{k}={v!r} is invalid: allowed an integer >= 1 (in the paper's units)")
        for k in WIDTH_KNOBS:
            if k in out:
                out[k] = max(1, int(round(out[k] * self.width)))
        if "d_model" in out and out.get("positional", "sinusoidal") == "sinusoidal" and out["d_model"] % 2:
            out["d_model"] += 1
        if out.get("positional") == "rope" and out.get("d_k", 2) % 2:  # rope rotates pairs of d_k
            out["d_k"] += 1
        for k in DEPTH_KNOBS:
            if out.get(k) is not None:
                out[k] = max(1, math.ceil(out[k] / self.depth_divisor))
        return out

    def scale_steps(self, paper_steps: int) -> int:
        return max(1, int(round(paper_steps * self.steps_factor)))

    def rules(self) -> dict:
        return {
            "profile": self.name,
            "width": self.width,
            "depth_divisor": self.depth_divisor,
            "steps_factor": self.steps_factor,
            "train": self.train,
            "data": self.data,
            "exclude": self.exclude,
        }


def load_profiles() -> dict[str, Profile]:
    text = resources.files("sweeps").joinpath("specs/profiles.yaml").read_text(encoding="utf-8")
    return {name: Profile(name=name, **body) for name, body in yaml.safe_load(text).items()}


def get_profile(name: str) -> Profile:
    profiles = load_profiles()
    if name not in profiles:
        raise ConfigError(f"unknown profile {name!r}: allowed {', '.join(profiles)}")
    return profiles[name]


# --- help text of the commands' --profile, from profiles.yaml ----------------------------------------------------
def profiles_help() -> str:
    """Every profile's name in the file's order, for a --profile option's help."""
    names = list(load_profiles())
    return f"{', '.join(names[:-1])} or {names[-1]} (sweeps/specs/profiles.yaml)"


def profiles_described() -> str:
    """One line per profile: its name, its description and any other name it answers to."""
    profiles = load_profiles()
    width = max(map(len, profiles))
    lines = []
    for p in profiles.values():
        aliases = getattr(p, "aliases", ())
        also = f" (also: {', '.join(aliases)})" if aliases else ""
        lines.append(f"  {p.name:<{width}}  {p.description}{also}")
    return "\n".join(lines)


PROFILES_HELP = profiles_help()  # tests check that it names every profile of profiles.yaml
