"""Authorization and quotas: pure cores that the brokers and the control plane share.

``acl`` is the authorizer (Kafka's ACL model); ``quotas`` is Kafka's client-quota math.
Neither does I/O, so both are tested in memory and imported by ``backend`` as they are.
"""

from brokernodes.security.acl import (
    AclBinding,
    AclBindingFilter,
    Authorizer,
    Decision,
    InvalidAclError,
    Operation,
    PatternType,
    PermissionType,
    ResourceType,
    validate_binding,
)
from brokernodes.security.quotas import (
    ClientQuotas,
    QuotaConfig,
    QuotaExceededError,
    QuotaKind,
    QuotaManager,
    check_count,
    check_storage,
    validate_quotas,
)

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "Authorizer",
    "ClientQuotas",
    "Decision",
    "InvalidAclError",
    "Operation",
    "PatternType",
    "PermissionType",
    "QuotaConfig",
    "QuotaExceededError",
    "QuotaKind",
    "QuotaManager",
    "ResourceType",
    "check_count",
    "check_storage",
    "validate_binding",
    "validate_quotas",
]
