/** How many jobs a queue holds by state (QueueCounts) and what a sweep reads of them (SweepCounts). */

/**
 * A queue's job counts, each job counted once, in the state it is in: the fields add up to every job of
 * the queue. A busy worker's reservations are waiting jobs, counted where they came from.
 */
export interface QueueCounts {
  /** Waiting jobs without a priority (BullMQ's `waiting`). */
  wait: number
  /** Waiting jobs with a priority. */
  prioritized: number
  /** In-flight jobs no sweep has marked (BullMQ's `active` is this plus `stalled`). */
  active: number
  /** In-flight jobs a sweep has marked stalled: their lease lapsed, a later sweep recovers them. */
  stalled: number
  delayed: number
  completed: number
  failed: number
}

/**
 * The sizes a sweep reads for the reaper's gauges (WaitingCount, ActiveCount...; lua/probe-15.lua). Not
 * QueueCounts: `wait` is every waiting job (the backlog: prioritized and reserved ones included) and
 * `active` every job in flight (marked ones included); `prioritized` and `stalled` say how many of those.
 */
export interface SweepCounts {
  wait: number
  prioritized: number
  active: number
  stalled: number
  delayed: number
  completed: number
  failed: number
}
