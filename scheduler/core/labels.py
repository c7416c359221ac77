"""Kubernetes' syntax of a label's key and value (apimachinery's IsQualifiedName and
IsValidLabelValue), which the API server checks wherever one is written: a pod's labels, a
taint's or toleration's key and value. cellfit checks it where a name it is given becomes one
(a virtual cluster's name, read from a pod label; a configuration's tolerations), so that the
mistake is told naming cellfit's field, not a pod field its user never wrote."""

from __future__ import annotations

import re
from typing import Final

# A name part, and a whole value (which may be empty).
LABEL_NAME_RULE: Final = "up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
LABEL_VALUE: Final = re.compile(r"(?=.{0,63}\Z)(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?", re.ASCII)
# An optional DNS-subdomain prefix and '/', then a name part.
LABEL_KEY: Final = re.compile(
    r"(?:(?=[^/]{1,253}/)[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
    r"(?=.{1,63}\Z)[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
