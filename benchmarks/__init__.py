"""Benchmarks and measuring-only code (simulated tables, guard variants): run as scripts, imported by the tests as
``benchmarks.X``; never imported by the library, and not shipped with it."""
