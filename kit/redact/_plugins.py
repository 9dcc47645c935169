"""detect-secrets' detector set, loaded by ``_detect`` on the first text redacted (it brings ``requests``):
its regex plugins' ``denylist`` patterns (not public IPs, not private keys: the pattern table has those),
its keyword regexes with their false-positive filters, and its entropy scorers."""
from __future__ import annotations

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters.heuristic import is_indirect_reference, is_templated_secret
from detect_secrets.plugins import keyword
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString

REGEXES = [rx for cls in get_mapping_from_secret_type_to_class().values()
           if issubclass(cls, RegexBasedDetector) and cls.__name__ not in ("IPPublicDetector", "PrivateKeyDetector")
           for rx in cls().denylist]
KEYWORDS = [*keyword.CONFIG_DENYLIST_REGEX_TO_GROUP.items(), *keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items()]
B64, HEX = Base64HighEntropyString(), HexHighEntropyString()
__all__ = ["B64", "HEX", "KEYWORDS", "REGEXES", "is_indirect_reference", "is_templated_secret"]
