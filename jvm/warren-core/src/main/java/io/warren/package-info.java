/**
 * Warren's Java API: {@link io.warren.Communicator} (allreduce, broadcast, allgather, barrier),
 * {@link io.warren.Tracker} (rendezvous, run in-process) and the exceptions the native library
 * maps its errors to ({@link io.warren.WarrenException} and subclasses).
 */
package io.warren;
