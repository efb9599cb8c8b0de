"""How the nodes of a multi-node SGLang server are started: one entry per ``[server] node_launcher``.

A single-node profile is one local process (:class:`specdash.sglang.process.ServerProcess`, started by
:class:`specdash.launch.ServerLaunch`); a multi-node one runs the same command on every node
(:func:`specdash.profile.flags.build_node_launches`), and its ``node_launcher`` names who starts them:

* ``attach`` (the default): the user does, and specdash attaches to node 0 with ``--url``;
* ``ssh``: specdash, through the system OpenSSH client (:func:`specdash.sglang.remote.ssh_argv`);
* ``slurm``: specdash, inside an allocation, one ``srun`` job step per node (:func:`specdash.sglang.remote.srun_argv`).

Everything that differs between them is here — whether specdash starts the nodes, the local client that
runs the node script, the check before a launch, the line ``profile show`` prints, where the profile keeps
the client's extra options — so the schema (its allowed names: :data:`NODE_LAUNCHER_NAMES`), the launch
path, the refusal to launch and ``profile show`` read one table.  A new launcher is its client builder
(beside :mod:`specdash.sglang.remote`'s) plus one :class:`NodeLauncher` in :data:`NODE_LAUNCHERS`; a list
of extra client options for it is one field more in :class:`specdash.profile.schema.ServerSection`.

Light to import (the profile schema reads it): the builders are imported when a launch needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class NodeLauncher:
    """One way to start the nodes.

    ``name``: the ``node_launcher`` value.  ``what``: who starts the nodes, in the refusal's words (empty
    for ``attach``).  ``client``: ``(host, script, options, job_name) → argv`` of the local process that runs
    one node's script (:func:`specdash.sglang.remote.node_script`); None when specdash starts nothing.
    ``new_session``: the script puts the server in a session of its own (False where the scheduler tracks
    and ends the step's processes itself).  ``problem``: ``hosts → why this launcher cannot start them from
    here`` (None: no check).  ``show``: ``(options, job_name, url) → the line profile show ends with``.
    ``options_field``: the ``[server]`` list of extra client options it reads (None: none).
    """

    name: str
    what: str
    show: Callable[[Sequence[str], str, str], str]
    client: Callable[[str, str, Sequence[str], str], list[str]] | None = None
    new_session: bool = True
    problem: Callable[[Sequence[str]], str | None] | None = None
    options_field: str | None = None

    @property
    def starts_nodes(self) -> bool:
        """Whether specdash starts the nodes itself."""
        return self.client is not None


def _ssh_client(host: str, script: str, options: Sequence[str], job_name: str) -> list[str]:
    from specdash.sglang.remote import ssh_argv

    return ssh_argv(host, script, options)


def _srun_client(host: str, script: str, options: Sequence[str], job_name: str) -> list[str]:
    from specdash.sglang.remote import srun_argv

    return srun_argv(host, script, options, job_name=job_name)


def _slurm_problem(hosts: Sequence[str]) -> str | None:
    from specdash.sglang.remote import slurm_problem

    return slurm_problem(hosts)


def _srun_show(options: Sequence[str], job_name: str, url: str) -> str:
    from specdash.sglang.remote import SRUN_BASE

    srun = " ".join([*SRUN_BASE, "--nodelist=HOST", f"--job-name={job_name}", *options])
    return (f"node_launcher = \"slurm\": inside an allocation (salloc / sbatch) specdash starts each line as a job "
            f"step on its Slurm node (srun {srun} sh -c …) and serves from node 0 at {url}")


#: Every node launcher by name; the first is the default.
NODE_LAUNCHERS: dict[str, NodeLauncher] = {launcher.name: launcher for launcher in (
    NodeLauncher("attach", "", show=lambda options, job_name, url: (
        f"specdash does not start these nodes (node_launcher = \"attach\"): run each line on its node, then attach "
        f"with --url {url}")),
    NodeLauncher("ssh", "the system ssh client", client=_ssh_client, options_field="ssh_options",
                 show=lambda options, job_name, url: (
                     f"node_launcher = \"ssh\": specdash starts each line on its host over ssh (BatchMode) and serves "
                     f"from node 0 at {url}")),
    NodeLauncher("slurm", "srun job steps inside an allocation", client=_srun_client, new_session=False,
                 problem=_slurm_problem, options_field="slurm_options", show=_srun_show),
)}
#: The names a profile's ``node_launcher`` takes.
NODE_LAUNCHER_NAMES: tuple[str, ...] = tuple(NODE_LAUNCHERS)
#: ``node_launcher`` when a profile names none.
DEFAULT_NODE_LAUNCHER = NODE_LAUNCHER_NAMES[0]


def node_launcher(name: str | None) -> NodeLauncher:
    """The launcher ``name`` names (None: the default, ``attach``).

    Raises:
        KeyError: no such launcher (the profile schema allows only :data:`NODE_LAUNCHER_NAMES`).
    """
    return NODE_LAUNCHERS[name or DEFAULT_NODE_LAUNCHER]


def starting_launchers() -> list[NodeLauncher]:
    """The launchers with which specdash starts the nodes itself, in table order."""
    return [x for x in NODE_LAUNCHERS.values() if x.starts_nodes]


def node_job_name(profile_name: str, rank: int | str) -> str:
    """The job name of node ``rank``'s step (``specdash-<profile>-node<R>``; ``profile_name`` already safe)."""
    return f"specdash-{profile_name}-node{rank}"


__all__ = ["DEFAULT_NODE_LAUNCHER", "NODE_LAUNCHERS", "NODE_LAUNCHER_NAMES", "NodeLauncher", "node_job_name",
           "node_launcher", "starting_launchers"]
