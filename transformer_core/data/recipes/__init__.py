"""Corpus recipes: real parallel text, each fetched by package name or given as files.

A recipe returns a RawCorpus: (English, other language) pairs for train, dev
and test, plus provenance (package versions).  Translation direction is
applied later, so every recipe is written once per language pair.

One module per source, each with a ``RECIPES`` tuple, listed here explicitly (``list_recipes``):
nothing registers itself by being imported.
"""

from __future__ import annotations

from ...errors import did_you_mean
from ..input_error import DataInputError
from ..raw import Pairs, RawCorpus, Recipe
from . import bible, debian, files, wmt
from .bible import clean_verse
from .files import read_lines, read_parallel

__all__ = [
    "Pairs",
    "RawCorpus",
    "Recipe",
    "RECIPES",
    "get_recipe",
    "recipe_names",
    "list_recipes",
    "clean_verse",
    "read_lines",
    "read_parallel",
]

MODULES = (bible, files, debian, wmt)


def list_recipes() -> dict[str, Recipe]:
    """Every corpus recipe by name, from each recipe module in turn."""
    recipes = {}
    for module in MODULES:
        for recipe in module.RECIPES:
            if recipe.name in recipes:
                raise ValueError(f"two corpus recipes are named {recipe.name!r}")
            recipes[recipe.name] = recipe
    return recipes


RECIPES: dict[str, Recipe] = list_recipes()


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        hint = did_you_mean(name, sorted(RECIPES))
        raise DataInputError(f"unknown corpus recipe {name!r}{hint}: known recipes are {', '.join(sorted(RECIPES))}")
    return RECIPES[name]


def recipe_names(name: str) -> list[str]:
    """The recipes of ``name`` (one, or several joined by '+'), each known: refused in one line otherwise, before
    anything is locked, fetched or written."""
    parts = name.split("+")
    if "" in parts:
        raise DataInputError(
            f"corpus {name!r} is invalid: allowed a recipe name or several joined by '+', none empty;"
            f" known recipes are {', '.join(sorted(RECIPES))}"
        )
    for part in parts:
        get_recipe(part)
    return parts
