"""Pacing math: how W independent tasks add up to ``tps`` events per second, never more (rule 6).

There is no coordinator at run time, so the schedule is fixed up front from the partition sizes
(counted on the driver) and each task only follows its own deadlines:

* Rates are real numbers, never floored: 10 TPS over 56 slots is one event every 5.6 s per slot.
* Partitions run in rounds of W (Spark launches tasks in partition order, one per free slot), so
  partition ``p`` is slot ``p mod W`` of round ``p // W``; a round lasts ``rows_in_round / tps``
  seconds and the next one starts where it ended, so a slot's next partition continues its
  schedule instead of restarting.
* Within a round, each task's share is proportional to its size, ``tps * n_p / N`` (``N`` the
  round's rows), and the tasks interleave: the k-th event of the round, over all its partitions in
  order of their even spacing, is due at ``k / tps`` (see ``Segment``). So the round's deadlines are
  one evenly spaced sequence ``1 / tps`` apart from its first event to its last at any skew, every
  partition of the round ends at ``N / tps``, and no task ever speeds up when a sibling finishes (a
  sibling that started late may still be sending: speeding up would overlap it). A hot key that
  holds most of a window makes its partition's task carry most of ``tps``; what one task cannot
  send at that rate is reported as behind schedule.
* A task that starts after its first deadline (after the shuffle, after sorting its own partition)
  shifts its own schedule by whole mean intervals of its own; with equal sizes that keeps every
  deadline on the round's grid. Less than half a grid step late (``ON_GRID``) is on time.
* Deadlines are absolute (on a monotonic clock), so sleep overshoot never accumulates into drift.
  Events already due go out as one batch, which keeps per-event Python overhead low.
* A rate is also a ceiling (rule 8): a task that fell behind catches up at most ``CATCH_UP``
  above its own share, never in a burst; what it cannot make up is reported. See ``Pacer``.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from spark_job.publish.timeline import Timeline


@dataclass(frozen=True)
class Segment:
    """One partition's events in its round, interleaved by size with the round's other partitions.

    ``members`` are the sizes of the round's partitions that hold rows, in partition order, and
    ``own`` is this one's place among them. Partition ``q`` ideally sends its i-th event at the
    fraction ``(i + 1/2) / n_q`` of the round; over the whole round those ideal times, in order (ties
    to the lower partition), are the events ``0 .. N - 1``, and event ``k`` is due at ``k / tps``.
    Each task works out its own ranks from the sizes alone, so the round's deadlines are exactly the
    grid ``1 / tps`` apart from its first event to its last, whatever the skew, and every partition
    of the round finishes in the same second: its rate is ``tps * n_p / N``.
    """

    start_s: float  # seconds after the job-wide t0 at which the round begins
    first: int  # partition-local index of its first event
    members: tuple[int, ...]  # rows of the round's partitions that hold any, in partition order
    own: int  # this partition's place among them

    @property
    def count(self) -> int:
        return self.members[self.own]

    @cached_property
    def round_rows(self) -> int:
        return sum(self.members)

    @cached_property
    def even(self) -> bool:
        """Every member holds as many rows: the interleaving is a plain stagger."""
        return len(set(self.members)) == 1

    def rank(self, local: int) -> int:
        """Place of this partition's ``local``-th event among all the round's events (0-based)."""
        if self.even:
            return local * len(self.members) + self.own
        own = self.count
        rank = local
        for place, rows in enumerate(self.members):
            if place == self.own:
                continue
            # events i of partition q with (i + 1/2) / n_q before (j + 1/2) / n_p, in integers
            scaled, unit = (2 * local + 1) * rows - own, 2 * own
            before = scaled // unit + 1 if place < self.own else -(-scaled // unit)
            rank += min(rows, max(0, before))
        return rank

    def due(self, index: int, tps: float) -> float:
        return self.start_s + self.rank(index - self.first) / tps

    def share(self, tps: float) -> float:
        """This task's rate in events per second: its part of the round's rows, of ``tps``."""
        return tps * self.count / self.round_rows

    def window_share(self, tps: float) -> float:
        """The most events per second this task's own deadlines hold in any one second, less one.

        Interleaving by size moves a deadline by at most half an event per sibling from an even
        spacing, so a second of the round holds fewer than ``(tps + A - 1) * n_p / N + 1`` of them
        (A members); with equal sizes the spacing is even and that is the share itself.
        """
        if self.even:
            return self.share(tps)
        return min(tps, (tps + len(self.members) - 1) * self.count / self.round_rows)

    def events_due(self, elapsed: float, tps: float) -> int:
        """Events of this stretch due ``elapsed`` seconds after t0, exactly consistent with ``due``."""
        if self.count == 0 or elapsed < self.due(self.first, tps):
            return 0
        low, high = 1, self.count  # the first is due; find the most that are (ranks only grow)
        guess = math.floor((elapsed - self.start_s) * self.share(tps)) + 1
        if 1 <= guess <= self.count:  # the even spacing's answer, off by at most a few
            if self.due(self.first + guess - 1, tps) <= elapsed:
                low = guess
            else:
                high = guess - 1
        while low < high:
            middle = (low + high + 1) // 2
            if self.due(self.first + middle - 1, tps) <= elapsed:
                low = middle
            else:
                high = middle - 1
        return low


@dataclass(frozen=True)
class PartitionSchedule:
    """When each event of one partition is due, in seconds after t0; ``tps`` 0 = unthrottled."""

    tps: float
    segments: tuple[Segment, ...]

    @cached_property
    def rows(self) -> int:
        return sum(segment.count for segment in self.segments)

    @cached_property
    def _firsts(self) -> list[int]:
        return [segment.first for segment in self.segments]

    def due(self, index: int) -> float:
        if self.tps == 0:
            return 0.0
        return self._segment(index).due(index, self.tps)

    def known(self, index: int) -> bool:
        """Every deadline is known up front."""
        return True

    def interval(self, index: int) -> float:
        """Mean seconds between this task's events around ``index`` (0 when unthrottled)."""
        return 0.0 if self.tps == 0 else 1 / self._segment(index).share(self.tps)

    def window_share(self, index: int) -> float:
        """Events per second the window cap allows this task around ``index`` (see ``Segment``)."""
        return math.inf if self.tps == 0 else self._segment(index).window_share(self.tps)

    def events_due(self, elapsed: float) -> int:
        """How many events are due ``elapsed`` seconds after t0."""
        if self.tps == 0:
            return self.rows
        due = 0
        for segment in self.segments:
            reached = segment.events_due(elapsed, self.tps)
            due += reached
            if reached < segment.count:
                break
        return due

    def _segment(self, index: int) -> Segment:
        return self.segments[max(0, bisect.bisect_right(self._firsts, index) - 1)]


class TimedSchedule:
    """A partition whose events are due at times of their own (a shaped replay,
    ``spark_job.publish.time_shape``), in schedule seconds after t0, learnt a batch at a time.

    The task reads its partition as it sends it, so only the deadlines of the batches read so far are
    known (``extend``); one not yet known is due at infinity, which the pacer reads as "not yet". The
    deadlines never go back (the partition is in event-time order and the warp is monotone).
    ``interval`` is 0: a task that starts late cannot move its events (they are the traffic's own
    times, shared with every other task), so it is behind and catches up within ``CATCH_UP``. The
    ceiling is the warp's, to the histogram's resolution; ``share`` (the ceiling times the task's part
    of the rows) is its window cap besides, so events bunched inside a bucket never put a second of
    this task above ``(1 + CATCH_UP) * share + 1``: they wait, and are reported if not made up.
    """

    tps = math.inf  # paced (not 0), by its own times

    def __init__(self, rows: int, share: float = math.inf) -> None:
        self.rows = rows
        self._share = share
        self._dues: list[float] = []

    def extend(self, dues: Sequence[float]) -> None:
        last = self._dues[-1] if self._dues else -math.inf
        for due in dues:
            last = max(last, due)
            self._dues.append(last)

    def known(self, index: int) -> bool:
        return index < len(self._dues)

    def due(self, index: int) -> float:
        return self._dues[index] if index < len(self._dues) else math.inf

    def interval(self, index: int) -> float:
        return 0.0

    def window_share(self, index: int) -> float:
        return self._share

    def events_due(self, elapsed: float) -> int:
        return bisect.bisect_right(self._dues, elapsed)


Schedule = PartitionSchedule | TimedSchedule


def partition_schedule(sizes: Sequence[int], tps: float, slots: int, partition: int) -> PartitionSchedule:
    """The schedule of ``partition`` when partitions of ``sizes`` rows run ``slots`` at a time."""
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    if tps < 0:
        raise ValueError(f"tps must be >= 0, got {tps}")
    if tps == 0:
        return PartitionSchedule(0, (Segment(0.0, 0, (sizes[partition],), 0),))
    first = partition - partition % slots
    start = sum(sizes[:first]) / tps  # each round lasts its rows / tps: every member ends with it
    members = sizes[first : first + slots]
    own = partition - first
    if members[own] == 0:
        return PartitionSchedule(tps, ())
    active = [slot for slot, rows in enumerate(members) if rows > 0]
    sizes_held = tuple(members[slot] for slot in active)
    return PartitionSchedule(tps, (Segment(start, 0, sizes_held, active.index(own)),))


def schedules(sizes: Sequence[int], tps: float, slots: int) -> list[PartitionSchedule]:
    return [partition_schedule(sizes, tps, slots, partition) for partition in range(len(sizes))]


def due_time(schedule: PartitionSchedule, index: int, t0: float) -> float:
    """Absolute (clock) time at which event ``index`` of the partition is due."""
    return t0 + schedule.due(index)


# A first look later than its first deadline by at most this many of the round's grid steps (1 / tps)
# sends that event at once: it still falls before the next event of any sibling, so it pairs with none,
# and shifting by a whole interval of its own (seconds at a low rate) would cost the run that much.
ON_GRID = 0.5
CATCH_UP = 0.05  # a task behind schedule sends at most 5 % above its own share until it is back on time
MAX_STEP_S = 0.15  # the most real time one gap between two looks at the clock earns: beyond, it is a stall
WINDOW_S = 1.0  # the ceiling holds in every window of this length (rule 8: per second)


def window_cap(share: float) -> int:
    """The most events a task of ``share`` events/s is granted in any ``WINDOW_S`` of real time.

    ``floor((1 + CATCH_UP) * share) + 1`` (at most ``ceil((1 + CATCH_UP) * share) + 1``): the catch-up
    allowance plus the one event an interval's edge can add. In steady state a window holds at most
    ``ceil((1 + late) * share)`` events, ``late`` being how late a wake-up comes after its deadline, so
    at one rate the cap never binds while wake-ups are less than ``CATCH_UP`` seconds late. In a
    window that straddles a drop the share is the rates' average, so a wake-up late by less (about
    ``CATCH_UP * new / old`` seconds) may have an event held back: it stays owed.
    """
    return math.floor((1 + CATCH_UP) * share + 1e-9) + 1


class Pacer:
    """Hands out permission to send, by absolute deadline, for one task.

    ``take(limit)`` returns how many events may go now; ``wait(max_wait_s)`` sleeps until the next
    deadline (at least ``min_sleep_s``, so due events gather into small batches; at most
    ``max_wait_s`` and ``max_step_s``, so the caller can serve callbacks and progress).

    Events are due by a virtual schedule clock, not by the real one. While the task is on time the
    virtual clock is the real clock, so the schedule is exact. A gap between two looks at the clock
    earns at most ``max_step_s`` of real time: a longer one (a stall: a descheduled worker, a slow
    input batch, a long flush) leaves the task behind, and while behind its schedule gains at most
    ``1 + CATCH_UP`` times what the rate in force makes in that time, so it recovers its deficit at
    most ``CATCH_UP`` above its own share instead of sending it as a burst. On top, no ``WINDOW_S``
    of real time is granted more than ``window_cap(share)`` events, whatever the gaps (``share`` is
    the schedule's ``window_share``: the task's share, or with unequal sizes the most its interleaved
    deadlines put in one second). With equal sizes the sum over W tasks whose shares add up to
    ``tps`` is thus at most ``(1 + CATCH_UP) * tps + W`` in any second.

    ``skipped_s`` is how far the virtual clock trails the real clock: while running, the schedule time
    the task owes; once its last event is granted, the schedule time it still owed then, i.e. how much
    later than its schedule the task finished because of stalls it could not make up (0 when it kept
    or regained its pace). A task that starts late (slow launch, next round, retry) is not behind: it
    shifts its schedule by whole intervals of its own, rounded up (it waits for its next slot on its
    own grid rather than sending the overdue event at once, which would pair it with the next one),
    which keeps its stagger among the slots, and ``late_start_s`` says by how much. A first look
    within ``ON_GRID`` grid steps of its deadline is on time: the event goes at once, nothing shifts.

    A rate change (live control) bends the schedule (``Timeline``); a gap's stretches faster than the
    rate now in force earn nothing, so a deficit from before a drop is repaid under the new rate's
    ceiling, not the old one's.

    A pause (live control) stops every grant, what a stall left owed included: paused clock time is
    neither a stall nor time the virtual clock earns, so a task behind at the pause is behind by about
    as much at the resume and catches up from there as it would have. About: the look that finds the
    pause earns nothing for the running time since the look before (at most one wait, 0.1 s), and
    within a gap's last ``max_step_s`` paused time takes the place of running time; what that leaves
    owed is repaid at most ``CATCH_UP`` above the share after the resume, never as a burst.
    """

    def __init__(
        self,
        schedule: Schedule,
        t0: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        min_sleep_s: float = 0.001,
        max_step_s: float = MAX_STEP_S,
        timeline: Timeline | None = None,
    ) -> None:
        self._schedule = schedule
        # clock time <-> schedule time: the identity from t0 unless the rate was changed (live control)
        self._timeline = timeline if timeline is not None else Timeline.fixed(t0)
        self._shift = 0.0  # schedule seconds this task's schedule moved later by a late start
        self._clock = clock
        self._sleep = sleep
        self._min_sleep_s = min_sleep_s
        self._max_step_s = max_step_s
        self.sent = 0
        self._started = False
        self._virtual = t0  # the schedule clock: events due at or before it may go
        self._last = t0  # the real clock at the last look
        self._on_time = True  # the virtual clock was the real clock at the last look
        self._granted: deque[tuple[float, int]] = deque()  # (time, sent) of grants in the last window
        self._window_base = 0  # ``sent`` at the last grant at least WINDOW_S before the last look
        self._window_frees_at = -math.inf  # when the window cap held events back: when it next moves
        self.late_start_s = 0.0  # how late the first event was, in whole intervals given up
        self.skipped_s = 0.0  # schedule time owed: see the class docstring

    @property
    def unthrottled(self) -> bool:
        return self._schedule.tps == 0

    def resume(self, sent: int) -> None:
        """Start after the first ``sent`` events, which an earlier attempt delivered (a transactional
        retry): the next one keeps its own deadline, and a late start shifts as any late start does."""
        assert not self._started, "resumed before the first take"
        self.sent = self._window_base = sent  # the window cap counts this attempt's grants only

    def next_due(self) -> float:
        """Clock time at which the next event may go: its deadline, later while behind or capped."""
        deadline = self._deadline(self.sent)
        speed = self._timeline.speed_at(self._last)
        if not self._on_time and speed > 0 and math.isfinite(deadline):  # behind: see `_advance`
            owed = max(0.0, self._timeline.schedule_of(deadline) - self._timeline.schedule_of(self._virtual))
            deadline = self._last + owed / ((1 + CATCH_UP) * speed)
        return max(deadline, self._window_frees_at, self._timeline.paused_until(self._last))

    def due(self, now: float) -> bool:
        """An event may go at ``now`` as far as the schedule goes: not paused, and its time has come."""
        return self._timeline.speed_at(now) > 0 and self.next_due() <= now

    def take(self, limit: int) -> int:
        """Claim up to ``limit`` events that are due now; the caller must send exactly that many."""
        if self.unthrottled:
            self.sent += limit
            return limit
        rows = self._schedule.rows
        if self.sent >= rows:
            return 0
        now = self._clock()
        if not self._started:  # the task's first look at the clock
            self._started = True
            lag = self._timeline.schedule_of(now) - self._shift - self._schedule.due(self.sent)
            interval = self._schedule.interval(self.sent)
            self._virtual = now
            if 0 < lag * self._schedule.tps <= ON_GRID:  # still in its own cell of the round's grid
                self.late_start_s = lag
            elif lag > 0 and interval > 0:
                self.late_start_s = math.ceil(lag / interval) * interval
                self._shift += self.late_start_s
            elif lag > 0:  # times of its own cannot move: it is behind from its first deadline
                self.late_start_s = lag
                self._virtual = self._deadline(self.sent)
        else:
            self._advance(now)
        self._last = now
        if self._timeline.speed_at(now) == 0:  # paused: nothing goes, not even what a stall left owed
            self._on_time = self._virtual >= now
            return 0
        wanted = min(limit, self._due_by(self._virtual) - self.sent)
        count = self._within_window(now, wanted) if wanted > 0 else 0
        if count < wanted:  # the window cap held some back: they stay owed, not banked for a burst
            self._virtual = min(self._virtual, self._deadline(self.sent + count - 1))
        if count > 0:
            self.sent += count
            self._granted.append((now, self.sent))
        if self.sent >= rows:
            self.skipped_s = max(0.0, now - self._virtual)  # still owed when the last event went
            self._virtual = now
        elif not self._schedule.known(self.sent):  # times of its own, the next batch's not read yet:
            self.skipped_s = max(0.0, now - self._virtual)  # the schedule clock stays where it is
        elif self._deadline(self.sent) > now:  # nothing owed: the schedule clock rejoins the real one
            self._virtual = now
            self.skipped_s = 0.0
        else:
            self.skipped_s = max(0.0, now - self._virtual)
        self._on_time = self._virtual >= now
        return count

    def wait(self, max_wait_s: float = 0.1) -> None:
        """Sleep toward the next deadline: no longer than ``max_wait_s``, no shorter than the floor."""
        if self.unthrottled or self.sent >= self._schedule.rows:
            return
        delay = self.next_due() - self._clock()
        if delay >= 0:  # 0 too: a deficit below the clock's resolution still needs time to pass
            self._sleep(min(max(delay, self._min_sleep_s), max_wait_s, self._max_step_s))

    def retime(self, timeline: Timeline) -> None:
        """Follow a new rate from now on (live control): the same schedule, bent by ``timeline``.

        Events already granted stay granted; the ones not yet sent fall due by the new timeline. The
        window cap keeps holding: it takes the rates in force over the window, each for its part.
        A task behind at a change repays what it owes at the new rate (see ``_advance``): after a
        drop, the old rate's owed events go out at most ``CATCH_UP`` above the new one.
        """
        self._timeline = timeline

    def _deadline(self, index: int) -> float:
        return self._timeline.clock_of(self._shift + self._schedule.due(index))

    def _due_by(self, virtual: float) -> int:
        """Events due by the virtual clock, exactly consistent with ``_deadline``."""
        due = self._schedule.events_due(self._timeline.schedule_of(virtual) - self._shift)
        rows = self._schedule.rows
        while due < rows and self._deadline(due) <= virtual:
            due += 1
        while due > 0 and self._deadline(due - 1) > virtual:
            due -= 1
        return due

    def _advance(self, now: float) -> None:
        """Move the virtual clock for the real time since the last look (see the class docstring)."""
        timeline = self._timeline
        # The gap's last max_step_s earn the schedule time they made, except stretches faster than
        # the rate in force now: what a task owes from before a drop it repays under the new rate's
        # ceiling, never at the old one's; across a rise (a ramp's steps) it loses nothing.
        start = max(self._last, now - self._max_step_s)
        earned = (1 + CATCH_UP) * timeline.ran_at_most(start, now, timeline.speed_at(now))
        virtual = self._virtual
        if earned > 0:
            virtual = timeline.clock_of(timeline.schedule_of(virtual) + earned)
        if self._on_time:  # a task on time may always send its next event once it is due
            virtual = max(virtual, self._deadline(self.sent))
        self._virtual = min(now, virtual)

    def _within_window(self, now: float, wanted: int) -> int:
        """How many of ``wanted`` events fit under ``window_cap`` for the window ending ``now``."""
        granted = self._granted
        while granted and now - granted[0][0] >= WINDOW_S:
            self._window_base = granted.popleft()[1]
        self._window_frees_at = -math.inf
        # The rates in force over the window, on average: the window straddling a change holds the old
        # rate's events and the new one's, each in proportion, and one after a drop the new rate only.
        timeline = self._timeline
        speed = (timeline.schedule_of(now) - timeline.schedule_of(now - WINDOW_S)) / WINDOW_S
        count = wanted
        while count > 0:  # the cap grows with the share of the last event granted: find the fixpoint
            planned = self._schedule.window_share(self.sent + count - 1)
            if math.isinf(planned):  # times of its own: the ceiling is in them (time_shape)
                break
            share = speed * planned
            allowed = self._window_base + window_cap(share) - self.sent
            if count <= allowed:
                break
            count = max(0, allowed)
        if count < wanted:
            self._window_frees_at = granted[0][0] + WINDOW_S if granted else now
        return count
