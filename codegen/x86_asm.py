"""x86-64 assembly (AT&T syntax, as LLVM prints it) read for the static CPU model: functions,
their basic blocks and natural loops, and each loop's trip count where its counter says it.

A loop is a natural loop of the control-flow graph: a back edge to a block that dominates its
source, with every block that reaches that source without passing the header (LLVM often puts
a loop's latch above its header and enters through a jump, so a loop is not always the span from
a label to a jump back to it). Its trip count comes from its counter: a jump that leaves or
continues the loop tests flags a compare with a constant sets (or an add that counts up to zero,
or a flag LLVM sets before a two-trip loop and clears in it); the counter, a register or a stack
slot it is reloaded from, steps by a constant inside the loop and starts from a constant set
before it. Where any of these is not a constant (a parallel loop's chunk, whose bounds arrive in
registers) the trip count is None and the caller supplies one from the loop IR.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# 8-, 16- and 32-bit names of the general-purpose registers, by their 64-bit name.
_ALIASES = {}
for _wide, _names in {"rax": ("eax", "ax", "al", "ah"), "rbx": ("ebx", "bx", "bl", "bh"),
                      "rcx": ("ecx", "cx", "cl", "ch"), "rdx": ("edx", "dx", "dl", "dh"),
                      "rsi": ("esi", "si", "sil"), "rdi": ("edi", "di", "dil"), "rbp": ("ebp", "bp", "bpl"),
                      "rsp": ("esp", "sp", "spl")}.items():
    for _name in _names:
        _ALIASES[_name] = _wide
for _number in range(8, 16):
    for _suffix in ("d", "w", "b"):
        _ALIASES[f"r{_number}{_suffix}"] = f"r{_number}"

_FLAG_WRITERS = ("cmp", "test", "add", "sub", "inc", "dec", "and", "or", "xor", "neg", "shl", "shr", "sar", "imul",
                 "sbb", "adc", "bt", "kortest", "ktest")
_NOT_WRITES = ("cmp", "test", "push", "j", "call", "bt", "kortest", "ktest")


@dataclass(frozen=True)
class Instruction:
    """One instruction: its mnemonic and operands (AT&T order: sources first, destination last)."""

    mnemonic: str
    operands: tuple

    @property
    def destination(self):
        return self.operands[-1] if self.operands else ""


@dataclass(frozen=True, eq=False)
class Loop:
    """A natural loop: its blocks (indices into Function.blocks, its inner loops' included), the
    loops directly inside, and its trip count per entry (None where the assembly does not say)."""

    header: int
    blocks: frozenset
    trips: int | None
    children: tuple

    def own_blocks(self):
        """Its blocks outside the loops nested in it."""
        inner = set().union(*(child.blocks for child in self.children)) if self.children else set()
        return sorted(self.blocks - inner)


@dataclass(frozen=True)
class Function:
    """A function's instructions, basic blocks ((start, end) instruction ranges), outermost loops
    and the calls it makes ((instruction index, callee))."""

    name: str
    instructions: tuple
    blocks: tuple
    loops: tuple
    calls: tuple

    def top_blocks(self):
        """Blocks outside every loop."""
        inner = set().union(*(loop.blocks for loop in self.loops)) if self.loops else set()
        return [block for block in range(len(self.blocks)) if block not in inner]

    def block_instructions(self, block):
        start, end = self.blocks[block]
        return range(start, end)


# ---------------------------------------------------------------- parsing

def parse(assembly):
    """{name: Function} of every function in the assembly."""
    functions = {}
    name, instructions, labels = None, [], {}
    for raw in assembly.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not raw[0].isspace() and line.endswith(":"):
            label = line[:-1]
            if not label.startswith("."):
                if name is not None and instructions:   # a data object's label holds no instructions
                    functions[name] = _function(name, instructions, labels)
                name, instructions, labels = label, [], {}
            labels.setdefault(len(instructions), []).append(label)
            continue
        text = line.strip()
        if text.startswith(".") or name is None:
            continue
        mnemonic, _, rest = text.replace("\t", " ", 1).partition(" ")
        instructions.append(Instruction(mnemonic, _split_operands(rest.strip())))
    if name is not None and instructions:
        functions[name] = _function(name, instructions, labels)
    return functions


def _split_operands(text):
    """Operands of an AT&T instruction: commas inside (...) or {...} do not separate."""
    if not text:
        return ()
    parts, depth, current = [], 0, []
    for char in text:
        if char in "({":
            depth += 1
        elif char in ")}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return tuple(parts)


def register(operand):
    """The 64-bit name of a general-purpose register operand ('%r15d' -> 'r15'), else None."""
    if not operand.startswith("%"):
        return None
    name = operand[1:]
    return _ALIASES.get(name, name)


def immediate(operand):
    """The value of an immediate operand ('$-4096'), else None."""
    if operand.startswith("$"):
        try:
            return int(operand[1:], 0)
        except ValueError:
            return None
    return None


def jump_target(instruction):
    """The label a direct jump goes to, else None."""
    if instruction.mnemonic.startswith("j") and instruction.operands and not instruction.operands[0].startswith("*"):
        return instruction.operands[0]
    return None


def _is_conditional(instruction):
    return instruction.mnemonic.startswith("j") and not instruction.mnemonic.startswith("jmp")


def _ends_block(instruction):
    return instruction.mnemonic.startswith(("j", "ret", "ud2"))


def _falls_through(instruction):
    return not instruction.mnemonic.startswith(("jmp", "ret", "ud2"))


# ---------------------------------------------------------------- control flow

def _function(name, instructions, labels):
    instructions = tuple(instructions)
    starts = sorted({0, *labels} | {index + 1 for index, instruction in enumerate(instructions)
                                    if _ends_block(instruction)})
    starts = [start for start in starts if start < len(instructions)]
    blocks = tuple(zip(starts, starts[1:] + [len(instructions)]))
    block_of_label = {label: starts.index(index) for index, names in labels.items() if index in starts
                      for label in names}
    successors = []
    for number, (start, end) in enumerate(blocks):
        last = instructions[end - 1]
        found = []
        target = jump_target(last)
        if target in block_of_label:
            found.append(block_of_label[target])
        if _falls_through(last) and number + 1 < len(blocks):
            found.append(number + 1)
        successors.append(found)
    loops = _natural_loops(instructions, blocks, successors)
    return Function(name, instructions, blocks, loops, _calls(instructions))


def _dominators(successors):
    """Immediate dominator of each block reachable from block 0 (Cooper, Harvey and Kennedy)."""
    order, seen = [], set()

    def visit(block):   # iterative post-order
        stack = [(block, iter(successors[block]))]
        seen.add(block)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                order.append(node)
                stack.pop()
            elif child not in seen:
                seen.add(child)
                stack.append((child, iter(successors[child])))

    visit(0)
    rank = {block: position for position, block in enumerate(order)}
    predecessors = {block: [] for block in order}
    for block in order:
        for child in successors[block]:
            predecessors[child].append(block)
    idom = {0: 0}
    changed = True
    while changed:
        changed = False
        for block in reversed(order):
            if block == 0:
                continue
            done = [p for p in predecessors[block] if p in idom]
            if not done:
                continue
            new = done[0]
            for other in done[1:]:
                a, b = new, other
                while a != b:
                    while rank[a] < rank[b]:
                        a = idom[a]
                    while rank[b] < rank[a]:
                        b = idom[b]
                new = a
            if idom.get(block) != new:
                idom[block] = new
                changed = True
    return idom, predecessors


def _dominates(idom, a, b):
    while True:
        if a == b:
            return True
        if b == 0 or b not in idom:
            return False
        b = idom[b]


def _natural_loops(instructions, blocks, successors):
    idom, predecessors = _dominators(successors)
    bodies = {}
    for source in idom:
        for header in successors[source]:
            if _dominates(idom, header, source):
                body = bodies.setdefault(header, {header})
                stack = [source]
                while stack:
                    node = stack.pop()
                    if node not in body:
                        body.add(node)
                        stack.extend(predecessors.get(node, ()))
    ordered = sorted(bodies.items(), key=lambda item: len(item[1]))
    parents = {}
    for position, (header, body) in enumerate(ordered):
        for other_header, other in ordered[position + 1:]:
            if body < other or (body <= other and other_header != header):
                parents[header] = other_header
                break
    children = {header: [] for header in bodies}
    for header, parent in parents.items():
        children[parent].append(header)

    def freeze(header):
        inner = tuple(freeze(child) for child in sorted(children[header]))
        body = frozenset(bodies[header])
        trips = _trip_count(instructions, blocks, successors, idom, predecessors, header, body, inner)
        return Loop(header, body, trips, inner)

    return tuple(freeze(header) for header in sorted(h for h in bodies if h not in parents))


def _calls(instructions):
    """(index, callee) of each call; LLVM's large code model calls through a register loaded
    with movabsq $name just before (a tail call jumps through it)."""
    found, loaded = [], {}
    for index, instruction in enumerate(instructions):
        if instruction.mnemonic == "movabsq" and instruction.operands[0].startswith("$"):
            loaded[register(instruction.operands[1])] = instruction.operands[0][1:]
        elif instruction.mnemonic.startswith("call") or (instruction.mnemonic.startswith("jmp")
                                                          and instruction.operands[0].startswith("*")):
            target = instruction.operands[0]
            callee = loaded.get(register(target[1:])) if target.startswith("*") else target
            if callee:
                found.append((index, callee))
    return tuple(found)


# ---------------------------------------------------------------- trip counts

def _trip_count(instructions, blocks, successors, idom, predecessors, header, body, inner):
    """Iterations per entry of a loop, or None where its counter is not plain."""
    nested = set().union(*(loop.blocks for loop in inner)) if inner else set()
    own = [block for block in sorted(body) if block not in nested]
    entries = [p for p in predecessors.get(header, ()) if p not in body]
    for block in own:
        last = blocks[block][1] - 1
        if not _is_conditional(instructions[last]):
            continue
        if all(successor in body for successor in successors[block]) and header not in successors[block]:
            continue   # a branch inside the loop, neither leaving nor continuing it
        trips = _trips_from(instructions, blocks, idom, body, own, block, entries)
        if trips is not None:
            return trips
    return None


def _trips_from(instructions, blocks, idom, body, own, block, entries):
    """Trip count from the condition ending block: the compare that sets its flags, the counter's
    constant step inside the loop and its constant value on entry."""
    start, end = blocks[block]
    flags = next((index for index in range(end - 2, start - 1, -1)
                  if instructions[index].mnemonic.startswith(_FLAG_WRITERS)), None)
    if flags is None:
        return None
    compare = instructions[flags]
    if compare.mnemonic.startswith("test") and compare.operands[0] == "$1":
        return 2   # LLVM runs a two-trip loop on a flag set before it and cleared in it
    if compare.mnemonic.startswith("cmp") and len(compare.operands) == 2:
        bound_operand, counter_operand = compare.operands
        bound = immediate(bound_operand)
        counter = counter_operand
        if bound is None:
            # cmp %bound, %counter or cmp %counter, %bound: whichever steps in the loop counts.
            if register(bound_operand) is None or register(counter_operand) is None:
                return None
            if _step(instructions, blocks, own, block, flags, counter_operand)[0] is None:
                counter, bound_operand = bound_operand, counter_operand
            if _writes_in(instructions, blocks, body, bound_operand):
                return None
            bound = _value_on_entry(instructions, blocks, idom, entries, bound_operand)
        step, location = _step(instructions, blocks, own, block, flags, counter)
    elif compare.mnemonic.startswith(("add", "sub", "inc", "dec")):
        bound = 0
        counter = compare.destination
        step = _step_of(compare, counter)
        location = _reloaded_from(instructions, blocks[block][0], flags, counter)
    else:
        return None
    if bound is None or not step:
        return None
    initial = _value_on_entry(instructions, blocks, idom, entries, location)
    if initial is None and location != counter:
        # A counter spilled in the loop and reloaded to step starts from its register's value.
        initial = _value_on_entry(instructions, blocks, idom, entries, counter)
    if initial is None:
        return None
    trips = (bound - initial) / step
    return math.ceil(trips) if trips > 0 else None


def _same_location(operand, location):
    name = register(operand)
    return name == register(location) if name is not None else operand == location


def _writes(instruction, location):
    return bool(instruction.operands) and not instruction.mnemonic.startswith(_NOT_WRITES) \
        and _same_location(instruction.destination, location)


def _writes_in(instructions, blocks, body, location):
    return any(_writes(instructions[index], location) for block in body for index in range(*blocks[block]))


def _step_of(instruction, counter):
    """The constant an instruction adds to counter, or None if it sets counter otherwise."""
    mnemonic = instruction.mnemonic
    if mnemonic.startswith("inc"):
        return 1
    if mnemonic.startswith("dec"):
        return -1
    if mnemonic.startswith(("add", "sub")) and len(instruction.operands) == 2:
        value = immediate(instruction.operands[0])
        if value is None:
            return None
        return value if mnemonic.startswith("add") else -value
    if mnemonic.startswith("lea") and len(instruction.operands) == 2:
        match = re.fullmatch(r"(-?\d+)?\(%(\w+)\)", instruction.operands[0])
        if match and _ALIASES.get(match.group(2), match.group(2)) == register(counter):
            return int(match.group(1) or 0)
    return None


def _reloaded_from(instructions, start, before, counter):
    """Where the counter's value comes from in this block: a stack slot it is reloaded from just
    before it steps, or the register itself."""
    for index in range(before - 1, start - 1, -1):
        instruction = instructions[index]
        if _writes(instruction, counter):
            if instruction.mnemonic.startswith("mov") and "(%rsp)" in instruction.operands[0]:
                return instruction.operands[0]
            break
    return counter


def _step(instructions, blocks, own, block, before, counter):
    """(the counter's step, where it lives: the register or the stack slot it is reloaded from),
    from the last write to it before the compare; (None, counter) where that is no constant step."""
    start, _ = blocks[block]
    for index in range(before - 1, start - 1, -1):
        if _writes(instructions[index], counter):
            step = _step_of(instructions[index], counter)
            return step, _reloaded_from(instructions, start, index, counter) if step else counter
    # Stepped in another block of the loop: the one write to it there.
    writes = [index for other in own for index in range(*blocks[other]) if _writes(instructions[index], counter)]
    if len(writes) == 1:
        return _step_of(instructions[writes[0]], counter), counter
    return None, counter


def _value_on_entry(instructions, blocks, idom, entries, location):
    """The constant a register or stack slot holds on entering the loop: its last write on the
    way in (the entering block, then its dominators), if that writes a constant."""
    if not entries:
        return None
    block = entries[0]
    while True:
        start, end = blocks[block]
        for index in range(end - 1, start - 1, -1):
            instruction = instructions[index]
            if not _writes(instruction, location):
                continue
            if instruction.mnemonic.startswith("xor") and len({register(o) for o in instruction.operands}) == 1:
                return 0
            if instruction.mnemonic.startswith("mov") and len(instruction.operands) == 2:
                return immediate(instruction.operands[0])
            return None
        if block == 0 or block not in idom:
            return None
        block = idom[block]
