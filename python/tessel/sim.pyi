import enum
from typing import Any, List, Optional, Sequence, Tuple, Union
from . import Array, Device, Stream
from .distributed import Communicator

DeviceLike = Union[Device, str, None]
Vec3 = Sequence[float]

class ContactModel(enum.Enum):
    """The normal contact law: ``linear`` (F = k * overlap) or ``hertz`` (F = k * sqrt(R_eff * overlap) * overlap)."""
    linear = ...
    hertz = ...

class ParticlesConfig:
    """The box, the boundaries, gravity, the contact law and the time step (keyword arguments; see the user guide for the defaults)."""
    box_lo: Tuple[float, float, float]
    box_hi: Tuple[float, float, float]
    walls: bool
    periodic: bool
    gravity: Tuple[float, float, float]
    model: ContactModel
    stiffness: float
    damping_ratio: float
    friction: float
    tangential_damping: float
    dt: float
    cell_size: float
    def __init__(self, *, box_lo: Optional[Vec3] = None, box_hi: Optional[Vec3] = None, walls: Optional[bool] = None, periodic: Optional[bool] = None, gravity: Optional[Vec3] = None, model: Union[ContactModel, str, None] = None, stiffness: Optional[float] = None, damping_ratio: Optional[float] = None, friction: Optional[float] = None, tangential_damping: Optional[float] = None, dt: Optional[float] = None, cell_size: Optional[float] = None) -> None: ...

class InitOptions:
    """What the init_* functions make: n, radius, polydispersity, density, speed, seed."""
    n: int
    radius: float
    polydispersity: float
    density: float
    speed: float
    seed: int
    def __init__(self, *, n: Optional[int] = None, radius: Optional[float] = None, polydispersity: Optional[float] = None, density: Optional[float] = None, speed: Optional[float] = None, seed: Optional[int] = None) -> None: ...

class ParticleState:
    """A host-side state, one entry per particle; attributes are NumPy copies."""
    positions: Any  # (n, 3) float32 NumPy copy
    velocities: Any
    x: Any
    y: Any
    z: Any
    vx: Any
    vy: Any
    vz: Any
    radius: Any
    mass: Any
    def __init__(self, positions: Any, velocities: Any = None, radius: Any = 0.004, mass: Any = None, *, density: float = 1000.0) -> None: ...
    def __len__(self) -> int: ...
    @property
    def size(self) -> int: ...

def init_gas(options: Optional[InitOptions] = None, config: Optional[ParticlesConfig] = None) -> ParticleState:
    """Uniform random positions in the box (kept a radius inside), velocities uniform in [-speed, speed]."""
def init_block(options: Optional[InitOptions] = None, config: Optional[ParticlesConfig] = None) -> ParticleState:
    """A jittered cubic lattice block in the upper part of the box, at rest (it falls under gravity)."""
def init_collision(options: Optional[InitOptions] = None, config: Optional[ParticlesConfig] = None) -> ParticleState:
    """Two lattice balls of n/2 particles each, flying at each other along x."""
def prepare_output_directory(path: str) -> None:
    """Creates ``path`` and checks that a file can be written there (ValueError naming the path and the reason otherwise)."""

class Particles:
    """A discrete-element simulation of soft spheres on a device (the same physics on the CPU and the GPU)."""
    def __init__(self, state: ParticleState, config: Optional[ParticlesConfig] = None, device: DeviceLike = None, stream: Optional[Stream] = None) -> None: ...
    @staticmethod
    def benchmark_setup(n: int = 1000000, device: DeviceLike = "cuda", *, seed: int = 2026) -> Particles:
        """The benchmark configuration: n particles of radius 0.004 uniformly in a walled box of n/1e6 unit volumes, linear contacts, gravity, dt 1e-4."""
    @staticmethod
    def required_bytes(n: int, cells: int, device: DeviceLike = None) -> int:
        """Device (or host) bytes a simulation of n particles over ``cells`` grid cells needs."""
    def step(self, count: int = 1) -> None:
        """Advances ``count`` time steps (asynchronous on the GPU)."""
    def diagnostics(self) -> dict:
        """Energies, momentum and contact counts, reduced on the device (a dict)."""
    def neighbor_list(self) -> Tuple[Any, Any]:
        """The contacts the grid search finds, in original particle indices (CSR offsets and indices; for tests)."""
    def state(self) -> ParticleState:
        """A host copy of the state in the original particle order."""
    def __len__(self) -> int: ...
    @property
    def positions(self) -> Array: ...
    @property
    def velocities(self) -> Array: ...
    @property
    def radii(self) -> Array: ...
    @property
    def masses(self) -> Array: ...
    @property
    def ids(self) -> Array: ...
    @property
    def size(self) -> int: ...
    @property
    def device(self) -> Device: ...
    @property
    def stream(self) -> Stream: ...
    @property
    def config(self) -> ParticlesConfig: ...
    @property
    def steps_done(self) -> int: ...
    @property
    def time(self) -> float: ...
    @property
    def stable_dt(self) -> float: ...
    @property
    def warnings(self) -> List[str]: ...
    @property
    def grid_dims(self) -> Tuple[int, int, int]: ...
    @property
    def cell_size(self) -> float: ...

class DistributedParticles:
    """The simulation split across the ranks of a communicator: slabs of the box along one axis, ghost
    particles within the interaction cutoff exchanged with the two neighbour ranks each step,
    particles that leave a slab migrated, diagnostics summed over the ranks (docs/guide/simulation.rst)."""
    def __init__(self, state: ParticleState, config: ParticlesConfig, comm: Optional[Communicator] = None, *, axis: int = 0, rebalance_every: int = 0) -> None:
        """Every rank passes the same full initial state and configuration; each keeps the particles in its slab. Collective over ``comm`` (default: ``ts.distributed.world()``). ValueError when the slabs would be thinner than the cutoff (twice the largest radius)."""
    @staticmethod
    def benchmark_setup(n: int = 1000000, comm: Optional[Communicator] = None, *, seed: int = 2026, rebalance_every: int = 0) -> DistributedParticles:
        """Particles.benchmark_setup's configuration, split across the ranks of comm."""
    def step(self, count: int = 1) -> None:
        """Advances ``count`` steps (collective)."""
    def diagnostics(self) -> dict:
        """Particles.diagnostics' dict summed over the ranks, plus ``rank_counts``, ``slab_bounds`` and ``imbalance`` (the largest count over the mean). Collective."""
    def gather(self, root: int = 0) -> ParticleState:
        """The whole state in the original particle order on ``root`` (an empty state elsewhere). Collective."""
    def __len__(self) -> int: ...
    @property
    def local_size(self) -> int: ...
    @property
    def global_size(self) -> int: ...
    @property
    def ghost_count(self) -> int: ...
    @property
    def steps_done(self) -> int: ...
    @property
    def time(self) -> float: ...
    @property
    def slab_bounds(self) -> List[float]: ...
    @property
    def cutoff(self) -> float: ...
    @property
    def config(self) -> ParticlesConfig: ...
    @property
    def warnings(self) -> List[str]: ...
