/**
 * Parameter servers for the JVM: {@link io.warren.ps.PsServer} runs a server (one shard of
 * every table) inside this JVM, {@link io.warren.ps.PsClient} is a trainer's connection to all
 * of a job's servers: {@link io.warren.ps.PsJob} defines the tables (dense and sparse, each
 * with a server-side {@link io.warren.ps.PsOptimizer}) and the consistency mode (sync, async,
 * bounded staleness), pulls fill {@code float[]}s or direct {@code FloatBuffer}s, and pushes
 * send {@link io.warren.ps.PsGradients}. The servers are Warren's native ones (the same as
 * {@code warren ps}): a trainer of this package and one of {@code warren example ps-train} can
 * share a job.
 */
package io.warren.ps;
