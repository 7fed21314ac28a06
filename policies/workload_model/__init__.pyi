from ._budget import (
    DEFAULT_CPU_SECONDS as DEFAULT_CPU_SECONDS,
    UNLIMITED as UNLIMITED,
    Budget as Budget,
    BudgetExceeded as BudgetExceeded,
    within as within,
)
from ._discovery import find_images as find_images
from ._extraction import (
    Unjudged as Unjudged,
    Workload as Workload,
    changed_since as changed_since,
    extract as extract,
    identify as identify,
    iter_resources as iter_resources,
    unknown_kind as unknown_kind,
)
from ._kinds import (
    GroupKind as GroupKind,
    KindDefinition as KindDefinition,
    KindRegistry as KindRegistry,
    group_of as group_of,
    named_kinds as named_kinds,
    parse_kind_name as parse_kind_name,
    template as template,
)
from ._operator_kinds import DEFAULT_KINDS as DEFAULT_KINDS
from ._paths import PathError as PathError, PathPattern as PathPattern
from ._pods import (
    EngineUse as EngineUse,
    ImageUse as ImageUse,
    PodTemplate as PodTemplate,
    SameImage as SameImage,
    by_image as by_image,
)
from ._podspec import ImageField as ImageField
from ._scheduling import NodeTerm as NodeTerm
