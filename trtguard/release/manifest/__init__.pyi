from ._create import (
    CreateInputs as CreateInputs,
    Environment as Environment,
    create_manifest as create_manifest,
)
from ._draft import Draft as Draft
from ._files import (
    parse_json as parse_json,
    read_manifest_file as read_manifest_file,
    read_yaml as read_yaml,
    read_yaml_as as read_yaml_as,
)
from ._flat import import_flat as import_flat
from ._probe import Distribution as Distribution
from ._settings import ManifestSettings as ManifestSettings
