"""Scale profiles (data in specs/profiles.yaml): the paper's units mapped onto a budget."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from importlib import resources
from typing import Optional

import yaml

from transformer_core.config import MODEL_KEYS, ModelConfig, paper_values
from transformer_core.errors import ConfigError, did_you_mean
from transformer_core.knobs import DEPTH_KNOBS, EVEN_WHEN, WIDTH_KNOBS  # the knob table says what scales

MAX_PAPER_STEPS = 1e12  # the paper trains 100,000 and 300,000 steps


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
    aliases: tuple = ()  # other names it answers to; not part of its rules (a trial never records them)
    purpose: str = "results"  # "test": for testing the pipeline, its verdicts mean nothing (analysis/stats/scale.py)

    def scale_model(self, knobs: dict) -> dict:
        """Model knobs in paper units -> knobs at this profile's scale."""
        out = dict(knobs)
        for k in WIDTH_KNOBS + DEPTH_KNOBS:  # checked before scaling: a string, .nan or .inf is the user's error
            v = out.get(k)  # a depth knob may be null (N_enc: N's), a width never is
            if (v is not None or (k in out and k in WIDTH_KNOBS)) and (
                isinstance(v, bool) or not isinstance(v, int) or v < 1
            ):
                raise ConfigError(f"{k}={v!r} is invalid: allowed an integer >= 1 (in the paper's units)")
        for k in WIDTH_KNOBS:
            if k in out:
                out[k] = max(1, int(round(out[k] * self.width)))
        for k, (other, value) in EVEN_WHEN.items():  # e.g. sinusoids pair d_model's dimensions, rope pairs d_k's
            if k in out and out.get(other, getattr(ModelConfig, other)) == value and out[k] % 2:
                out[k] += 1
        for k in DEPTH_KNOBS:
            if out.get(k) is not None:
                out[k] = max(1, math.ceil(out[k] / self.depth_divisor))
        return out

    def scale_steps(self, paper_steps: int) -> int:
        steps = paper_steps
        if isinstance(steps, bool) or not isinstance(steps, (int, float)) or not 1 <= steps <= MAX_PAPER_STEPS:
            shown = f"{steps!r}" if len(repr(steps)) <= 40 else f"{repr(steps)[:20]}..."
            raise ConfigError(f"train_steps={shown} is invalid: allowed a number in [1, {MAX_PAPER_STEPS:.0e}] (in "
                              "the paper's units)")  # fmt: skip
        return max(1, int(round(steps * self.steps_factor)))

    def scale_paper(self, paper: dict) -> dict:
        """A preset's values in paper units (transformer_core.config.paper_values) at this profile's scale: its
        model knobs scaled, its eps_ls, its steps scaled.  The one place paper units become run values: a spec's
        rows (spec.expand_row) and a preset at a profile (profile_values) both come through here."""
        return {
            **self.scale_model({k: paper[k] for k in MODEL_KEYS}),
            "eps_ls": paper["eps_ls"],
            "steps": self.scale_steps(paper["train_steps"]),
        }

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


def profile_values(preset: str, profile_name: str | None) -> dict:
    """Flat run keys for a preset at a profile's scale, with the profile's train and data settings (empty: the
    preset as published): what `tsweep train --profile` and `tsweep bench-device` train."""
    if not profile_name:
        return {}
    profile = get_profile(profile_name)
    return {**profile.scale_paper(paper_values(preset)), **profile.train, **profile.data}


def scale_warning(name: str) -> str | None:
    """The line a run's log prints for a test profile (``purpose: test``), None for any other."""
    from analysis.stats.scale import TEST_PURPOSE, purpose_line

    if get_profile(name).purpose != TEST_PURPOSE:
        return None
    return purpose_line(name).replace("**", "")


def load_profiles() -> dict[str, Profile]:
    """Every profile of profiles.yaml under its own name, in the file's order (aliases are not keys)."""
    text = resources.files("sweeps").joinpath("specs/profiles.yaml").read_text(encoding="utf-8")
    out = {}
    for name, body in yaml.safe_load(text).items():
        out[name] = Profile(name=name, **{**body, "aliases": tuple(body.get("aliases") or ())})
    return out


def profile_aliases() -> dict[str, str]:
    """alias -> the profile's own name."""
    return {alias: p.name for p in load_profiles().values() for alias in p.aliases}


def canonical_profile_name(name: str) -> str:
    """The profile's own name for ``name`` (itself, or the profile an alias names); unknown names unchanged."""
    return profile_aliases().get(name, name)


def same_profile(a: Optional[str], b: Optional[str]) -> bool:
    """Whether two profile names (either may be an alias) name one profile."""
    return a == b or (a is not None and b is not None and canonical_profile_name(a) == canonical_profile_name(b))


def get_profile(name: str) -> Profile:
    """The profile called ``name``, or answering to it as an alias.  The profile keeps the name it was asked
    for: a run under an alias records the alias, exactly as it did before the profile was given its own name,
    and its rules and trials are the profile's."""
    profiles = load_profiles()
    if name in profiles:
        return profiles[name]
    aliases = profile_aliases()
    if name in aliases:
        return dataclasses.replace(profiles[aliases[name]], name=name)
    hint = did_you_mean(name, [*profiles, *aliases])
    raise ConfigError(f"unknown profile {name!r}{hint}: allowed {', '.join(profiles)}")


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
