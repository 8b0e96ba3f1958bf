"""The error answers: Kubernetes Status objects in apimachinery/pkg/api/errors shapes, and the control API's.

Owns: ApiError (an HTTP status, a Status body or a plain-text one, extra headers), one constructor per
Status reason (NotFound, AlreadyExists, Conflict, Forbidden, Invalid, Expired, Timeout, ...), FieldError
(one field's validation failure, rendered into an Invalid Status's message and causes), and ControlError
(a failed control-API call, never a Kubernetes answer).
Implements docs/kube-api.md §1 (Status objects), §2.5, §4.3 and §4.6 (the error Status catalogue).
"""

from .util import go_quote, jdump


OPT_LOCK_MSG = "the object has been modified; please apply your changes to the latest version and try again"


def details(name=None, group=None, kind=None, uid=None, causes=None, retry=None):
    d = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    if kind:
        d["kind"] = kind
    if uid:
        d["uid"] = uid
    if causes:
        d["causes"] = causes
    if retry:
        d["retryAfterSeconds"] = retry
    return d


def status_obj(code, reason, message, det=None, status="Failure"):
    o = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": status}
    if message:
        o["message"] = message
    if reason:
        o["reason"] = reason
    if det is not None:
        o["details"] = det
    o["code"] = code
    return o


class ApiError(Exception):
    def __init__(self, code, reason, message, det=None, headers=None, plain=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.det = det
        self.headers = list(headers or [])
        self.plain = plain          # plain-text body instead of Status JSON

    def status(self):
        return status_obj(self.code, self.reason, self.message, self.det)


def gr_str(resource, group):
    return "%s.%s" % (resource, group) if group else resource


def err_not_found(resource, group, name):
    return ApiError(404, "NotFound", "%s %s not found" % (gr_str(resource, group), go_quote(name)),
                    details(name=name, group=group, kind=resource))


def err_already_exists(resource, group, name):
    return ApiError(409, "AlreadyExists", "%s %s already exists" % (gr_str(resource, group), go_quote(name)),
                    details(name=name, group=group, kind=resource))


def err_conflict(resource, group, name, msg=OPT_LOCK_MSG):
    return ApiError(409, "Conflict", "Operation cannot be fulfilled on %s %s: %s" %
                    (gr_str(resource, group), go_quote(name), msg), details(name=name, group=group, kind=resource))


def err_forbidden(resource, group, name, msg):
    if not resource:
        text = "forbidden: %s" % msg
    elif not name:
        text = "%s is forbidden: %s" % (gr_str(resource, group), msg)
    else:
        text = "%s %s is forbidden: %s" % (gr_str(resource, group), go_quote(name), msg)
    return ApiError(403, "Forbidden", text, details(name=name, group=group, kind=resource))


def err_bad_request(msg):
    return ApiError(400, "BadRequest", msg)


def err_expired(msg):
    return ApiError(410, "Expired", msg)


def err_internal(msg):
    return ApiError(500, "InternalError", "Internal error occurred: %s" % msg, details(causes=[{"message": msg}]))


def err_timeout(msg, retry=0):
    return ApiError(504, "Timeout", "Timeout: %s" % msg, details(retry=retry))


def err_too_large_rv(want, cur):
    return ApiError(504, "Timeout", "Timeout: Too large resource version: %d, current: %d" % (want, cur),
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                     "retryAfterSeconds": 1})


def err_method_not_allowed():
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource",
                    details())


def err_no_route():
    return ApiError(404, "NotFound", "the server could not find the requested resource", details())


def err_unauthorized():
    return ApiError(401, "Unauthorized", "Unauthorized")


def err_unsupported_media():
    return ApiError(415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
                    "application/strategic-merge-patch+json")


def err_generic_422():
    return ApiError(422, "Invalid", "the server rejected our request due to an error in our request", {})


class FieldError:
    REASONS = {"Invalid": "FieldValueInvalid", "Required": "FieldValueRequired", "Forbidden": "FieldValueForbidden",
               "NotSupported": "FieldValueNotSupported", "TooLong": "FieldValueTooLong",
               "Duplicate": "FieldValueDuplicate"}

    def __init__(self, ftype, field, value=None, detail=""):
        self.ftype, self.field, self.value, self.detail = ftype, field, value, detail

    def body(self):
        if self.ftype == "Invalid":
            v = go_quote(self.value) if isinstance(self.value, str) else jdump(self.value)
            return "Invalid value: %s" % v + (": " + self.detail if self.detail else "")
        if self.ftype == "Required":
            return "Required value" + (": " + self.detail if self.detail else "")
        if self.ftype == "Forbidden":
            return "Forbidden" + (": " + self.detail if self.detail else "")
        if self.ftype == "NotSupported":
            return "Unsupported value: %s: supported values: %s" % (
                go_quote(self.value), ", ".join(go_quote(s) for s in self.detail))
        if self.ftype == "TooLong":
            return "Too long: must have at most %s bytes" % self.detail
        return "%s: %s" % (self.ftype, self.detail)

    def __str__(self):
        return "%s: %s" % (self.field, self.body())

    def cause(self):
        return {"reason": self.REASONS.get(self.ftype, "FieldValueInvalid"), "message": self.body(),
                "field": self.field}


def err_invalid(kind, group, name, errs):
    qk = "%s.%s" % (kind, group) if group else kind
    agg = str(errs[0]) if len(errs) == 1 else "[" + ", ".join(str(e) for e in errs) + "]"
    return ApiError(422, "Invalid", "%s %s is invalid: %s" % (qk, go_quote(name or ""), agg),
                    details(name=name, group=group, kind=kind, causes=[e.cause() for e in errs]))


class ControlError(Exception):
    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code
