"""Profiles (how to launch a server) and suites (what to send it), as validated TOML.

The package face: import from here.

* :mod:`~specdash.profile.schema` — the pydantic models (:class:`Profile`, :class:`Suite`,
  their sections), strict validation (:func:`parse_profile`, :func:`parse_suite`),
  ``${VAR}``/``~`` expansion (:func:`expand_path`), :class:`ProfileError`;
* :mod:`~specdash.profile.files` — TOML read/write, name lookup (:func:`load_profile`,
  :func:`load_suite`, :func:`list_profiles`, :func:`list_suites`, :func:`user_profile_dir`,
  :func:`preset_dirs`), :func:`profile_to_toml`, :func:`write_new_file`, :func:`safe_name`;
* :mod:`~specdash.profile.flags` — Profile → SGLang flags and launch (:func:`server_flags`,
  :func:`build_launch`) and the redacted profile of a manifest (:func:`redacted_profile_data`);
* :mod:`~specdash.profile.nodes` — multi-node profiles: structure checks (:func:`~specdash.profile.nodes.node_problems`,
  run by :func:`parse_profile`), each node's command (:func:`~specdash.profile.flags.build_node_launches`) and the
  refusal to launch them (:func:`~specdash.profile.nodes.launch_refusal`);
* :mod:`~specdash.profile.variants` — the variant maker (:func:`profile_variant`) and the
  preset writer (:func:`write_preset`, :func:`preset_path`).
"""

from specdash.profile.files import (
    list_profiles,
    list_suites,
    load_profile,
    load_suite,
    preset_dirs,
    profile_entries,
    profile_to_toml,
    safe_name,
    user_profile_dir,
    write_new_file,
)
from specdash.profile.flags import build_launch, redacted_profile_data, server_flags
from specdash.profile.schema import (
    NodeSection,
    Profile,
    ProfileError,
    Prompt,
    ServerSection,
    SimSection,
    SpeculativeSection,
    Suite,
    SuiteSection,
    expand_path,
    parse_profile,
    parse_suite,
)
from specdash.profile.variants import preset_path, profile_variant, write_preset

__all__ = [
    "NodeSection",
    "Profile",
    "ProfileError",
    "Prompt",
    "ServerSection",
    "SimSection",
    "SpeculativeSection",
    "Suite",
    "SuiteSection",
    "build_launch",
    "expand_path",
    "list_profiles",
    "list_suites",
    "load_profile",
    "load_suite",
    "parse_profile",
    "parse_suite",
    "preset_dirs",
    "preset_path",
    "profile_entries",
    "profile_to_toml",
    "profile_variant",
    "redacted_profile_data",
    "safe_name",
    "server_flags",
    "user_profile_dir",
    "write_new_file",
    "write_preset",
]
