"""The reader pool: first come first served, users before background reads, reserved
connections never lent to the background, and a cancelled wait never loses a connection."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from topicpulse.store.readers import Loan, ReaderPool, UsersFirst


def pool(n: int, reserved: int = 0) -> tuple[ReaderPool, list[Any]]:
    conns = [object() for _ in range(n)]
    return ReaderPool(cast(Any, conns), reserved), conns


async def waiting(borrower: asyncio.Task[Loan]) -> None:
    """Let ``borrower`` run until it waits in line."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert not borrower.done()


async def test_a_returned_connection_goes_to_the_first_in_line_not_to_a_newcomer() -> None:
    readers, _ = pool(1)
    held = await readers.borrow(interactive=False)
    order = []

    async def first_in_line() -> None:
        loan = await readers.borrow(interactive=False)
        order.append("first")
        readers.give_back(loan)

    first = asyncio.create_task(first_in_line())
    await waiting(first)
    readers.give_back(held)
    # This read asks before the woken one has run: it must not take the connection.
    loan = await readers.borrow(interactive=False)
    order.append("newcomer")
    readers.give_back(loan)
    await first
    assert order == ["first", "newcomer"]


async def test_a_user_waiting_goes_before_background_reads_that_asked_earlier() -> None:
    readers, _ = pool(1)
    held = await readers.borrow(interactive=False)
    background = asyncio.create_task(readers.borrow(interactive=False))
    await waiting(background)
    user = asyncio.create_task(readers.borrow(interactive=True))
    await waiting(user)
    readers.give_back(held)
    await asyncio.sleep(0)
    assert user.done() and not background.done()
    readers.give_back(user.result())
    assert (await background).conn is held.conn


async def test_reserved_connections_serve_users_only() -> None:
    readers, conns = pool(2, reserved=1)
    shared = await readers.borrow(interactive=False)
    background = asyncio.create_task(readers.borrow(interactive=False))
    await waiting(background)  # the reserved connection is idle, but not for it
    user = await readers.borrow(interactive=True)
    assert user.reserved and {user.conn, shared.conn} == set(conns)
    readers.give_back(user)  # a reserved connection goes back idle, not to the background
    await waiting(background)
    assert (await readers.borrow(interactive=True)).reserved
    readers.give_back(shared)
    assert (await background).conn is shared.conn


async def test_a_user_prefers_the_reserved_connection_and_one_connection_is_never_reserved() -> (
    None
):
    readers, _ = pool(3, reserved=1)
    assert (await readers.borrow(interactive=True)).reserved
    alone, _ = pool(1, reserved=1)
    assert not (await alone.borrow(interactive=False)).reserved


@pytest.mark.parametrize("handed_over", [False, True])
async def test_a_cancelled_wait_loses_no_connection(handed_over: bool) -> None:
    readers, _ = pool(1)
    held = await readers.borrow(interactive=False)
    doomed = asyncio.create_task(readers.borrow(interactive=True))
    await waiting(doomed)
    if handed_over:
        readers.give_back(held)  # the connection is handed over, then the wait is cancelled
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed
    if not handed_over:
        readers.give_back(held)
    # The connection is idle again: the next read takes it at once.
    assert (await asyncio.wait_for(readers.borrow(interactive=False), 1)).conn is held.conn


# ---------------------------------------------------------------------------------- users first
async def test_bulk_work_waits_while_a_user_is_served_and_goes_on_when_done() -> None:
    users = UsersFirst()
    await users.after_users(10.0)  # nobody served: no wait at all
    users.enter()
    users.enter()
    bulk = asyncio.create_task(users.after_users(10.0))
    for _ in range(3):
        await asyncio.sleep(0)
    users.leave()
    for _ in range(3):
        await asyncio.sleep(0)
    assert not bulk.done()  # one user still being served
    users.leave()
    await asyncio.wait_for(bulk, 1.0)
    assert users.count == 0


async def test_bulk_work_waits_for_users_at_most_so_long() -> None:
    users = UsersFirst()
    users.enter()  # a command that never ends
    await asyncio.wait_for(users.after_users(0.01), 5.0)
    users.leave()
    assert users.count == 0 and not users._waiting
