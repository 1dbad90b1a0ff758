"""The one owner-or-admin rule, as properties: who may use a source, cancel a run, manage a pipeline."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from daemon.core.authz import is_owner_or_admin, may_cancel_run, may_manage_pipeline, may_use_source

# A handful of users, so that actors, owners, admins and requesters often coincide.
users = st.sampled_from(["U1", "U2", "U3", "U4", "W5", "W6"])
groups = st.lists(users, max_size=4)


@given(users, groups, groups)
def test_owners_and_admins_may_and_nobody_else_may(actor: str, owners: list[str], admins: list[str]) -> None:
    allowed = is_owner_or_admin(actor, owners=owners, admins=admins)
    assert allowed == (actor in set(owners) | set(admins))
    assert may_use_source(actor, source_owners=owners, admins=admins) == allowed
    assert may_manage_pipeline(actor, owners=owners, admins=admins) == allowed


@given(users, groups, groups)
def test_an_admin_may_do_everything(actor: str, owners: list[str], admins: list[str]) -> None:
    admins = [*admins, actor]
    assert may_use_source(actor, source_owners=owners, admins=admins)
    assert may_manage_pipeline(actor, owners=owners, admins=admins)
    assert may_cancel_run(actor, requester="U9", source_owners=owners, admins=admins)


@given(users, users, groups, groups)
def test_a_stranger_may_do_nothing(actor: str, requester: str, owners: list[str], admins: list[str]) -> None:
    owners = [user for user in owners if user != actor]
    admins = [user for user in admins if user != actor]
    requester = requester if requester != actor else "U9"
    assert not may_use_source(actor, source_owners=owners, admins=admins)
    assert not may_manage_pipeline(actor, owners=owners, admins=admins)
    assert not may_cancel_run(actor, requester=requester, source_owners=owners, admins=admins)


@given(users, groups, groups)
def test_the_requester_may_cancel_their_own_run_even_without_owning_the_source(
    actor: str, owners: list[str], admins: list[str]
) -> None:
    assert may_cancel_run(actor, requester=actor, source_owners=owners, admins=admins)


@given(users, users, groups, groups)
def test_whoever_may_use_a_source_may_cancel_its_runs(
    actor: str, requester: str, owners: list[str], admins: list[str]
) -> None:
    if may_use_source(actor, source_owners=owners, admins=admins):
        assert may_cancel_run(actor, requester=requester, source_owners=owners, admins=admins)


@given(users, users, groups, groups, groups, groups)
def test_more_owners_or_admins_never_take_a_right_away(
    actor: str,
    requester: str,
    owners: list[str],
    admins: list[str],
    more_owners: list[str],
    more_admins: list[str],
) -> None:
    wider = {"owners": [*owners, *more_owners], "admins": [*admins, *more_admins]}
    if may_manage_pipeline(actor, owners=owners, admins=admins):
        assert may_manage_pipeline(actor, **wider)
    if may_cancel_run(actor, requester=requester, source_owners=owners, admins=admins):
        assert may_cancel_run(
            actor, requester=requester, source_owners=wider["owners"], admins=wider["admins"]
        )


@given(users, groups, groups)
def test_order_duplicates_and_container_type_do_not_matter(
    actor: str, owners: list[str], admins: list[str]
) -> None:
    expected = may_manage_pipeline(actor, owners=owners, admins=admins)
    assert (
        may_manage_pipeline(actor, owners=tuple(reversed(owners * 2)), admins=frozenset(admins)) == expected
    )
    assert may_manage_pipeline(actor, owners=set(owners), admins=sorted(admins)) == expected
