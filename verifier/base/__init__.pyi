from ._cache import ResultCache as ResultCache, SingleFlight as SingleFlight
from ._deadline import Deadline as Deadline
from ._digests import (
    FileDigest as FileDigest,
    ProgressCallback as ProgressCallback,
    hash_file as hash_file,
    is_sha256_hex as is_sha256_hex,
    parse_sha256 as parse_sha256,
    sha256_bytes as sha256_bytes,
)
from ._errors import (
    EvidenceUnavailable as EvidenceUnavailable,
    InputError as InputError,
    TrtguardError as TrtguardError,
    VerificationError as VerificationError,
)
from ._files import MAX_DOCUMENT_BYTES as MAX_DOCUMENT_BYTES, read_limited as read_limited
from ._frozen import quick_init as quick_init
from ._references import ImageReference as ImageReference, InvalidReference as InvalidReference
from ._validation import (
    field_problems as field_problems,
    format_path as format_path,
    input_error_from_validation as input_error_from_validation,
    short_repr as short_repr,
    shorten as shorten,
)
from ._visible import hidden as hidden, visible as visible
from ._yamldoc import (
    Document as Document,
    decode as decode,
    load_document as load_document,
    load_documents as load_documents,
    load_each_document as load_each_document,
)
