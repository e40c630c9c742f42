"""The composition root: the one place that reads the config and wires store,
providers and platforms together through constructor arguments.

Only this subpackage of `chatbridge.core` may import `chatbridge.config`,
`chatbridge.platforms` and `chatbridge.providers` (tests/test_architecture.py
enforces it). Modules: `wiring` (config -> engine parts), `registry` (typed platform
factories), `webhooks` (platforms' routes on the server), `serve` (`chatbridge run`),
`cli`, `logs`.
"""
