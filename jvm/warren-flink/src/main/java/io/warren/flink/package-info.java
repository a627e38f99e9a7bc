/**
 * Warren workers as the parallel subtasks of a Flink DataStream job: {@link
 * io.warren.flink.WarrenFlink#train} runs one worker per subtask, each with a {@link
 * io.warren.Communicator}, and recovers a failed subtask through Flink's region failover
 * (retry-one) or from durable checkpoints (fail-all). See docs/flink.md.
 */
package io.warren.flink;
