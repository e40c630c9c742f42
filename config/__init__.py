"""chatbridge configuration: one YAML file validated into frozen pydantic models.

Typical use::

    path = resolve_config_path(args.config, os.environ, Path.cwd())
    config = load_config(path, os.environ)   # raises ConfigError listing every problem
"""

from ._duration import Duration, parse_duration
from ._errors import ConfigError, ConfigIssue
from ._ids import check_user_id
from ._limits import LIMIT_KEYS, LimitsConfig, LimitValues, Prices
from ._loader import load_config, load_config_text, resolve_config_path
from ._models import (
    AccessConfig,
    BotConfig,
    ChatbridgeConfig,
    EngineConfig,
    LoggingConfig,
    MemoryConfig,
    ServerConfig,
)
from ._platforms import DiscordConfig, PlatformsConfig, SlackConfig, TelegramConfig
from ._providers import ProviderConfig, ProvidersConfig
from ._scopes import ScopeSettings, TopLevel, check_scope_id, scope_platform, top_level_of
from ._secret_files import SecretFileError, env_secret
from ._summary import describe_store, summarize
from ._urls import mask_url, url_secrets

__all__ = [
    "LIMIT_KEYS",
    "AccessConfig",
    "BotConfig",
    "ChatbridgeConfig",
    "ConfigError",
    "ConfigIssue",
    "DiscordConfig",
    "Duration",
    "EngineConfig",
    "LimitValues",
    "LimitsConfig",
    "LoggingConfig",
    "MemoryConfig",
    "PlatformsConfig",
    "Prices",
    "ProviderConfig",
    "ProvidersConfig",
    "ScopeSettings",
    "SecretFileError",
    "ServerConfig",
    "SlackConfig",
    "TelegramConfig",
    "TopLevel",
    "check_scope_id",
    "check_user_id",
    "describe_store",
    "env_secret",
    "load_config",
    "load_config_text",
    "mask_url",
    "parse_duration",
    "resolve_config_path",
    "scope_platform",
    "summarize",
    "top_level_of",
    "url_secrets",
]
