import React, { act } from 'react';
import { createRoot, Root } from 'react-dom/client';

import { RunDoctor } from '../components/RunDoctor';
import { IDoctorAPI, IJobHealth } from '../doctor';
import { ISeen, jobEvents } from '../notifications';
import { job } from './fixtures';

(globalThis as any).IS_REACT_ACT_ENVIRONMENT = true;

const HEALTH: IJobHealth = {
  state: 'slow',
  reason: 'rank 1 straggles: rank 1 takes 0.5 s a step, 2.5x the others',
  stall_after_s: 60,
  training: [],
  ranks: [0, 1].map(rank => ({
    rank,
    step: 50 - rank * 10,
    last_step_ago: 0.25,
    step_time: rank ? 0.5 : 0.2,
    host: 'node1',
    pid: 100 + rank,
    memory_mb: 2048,
    memory_kind: 'device',
    alive: true,
    slow: rank === 1,
    stalled: false
  }))
};

class FakeDoctor implements IDoctorAPI {
  calls: string[] = [];
  async health(id: string) {
    this.calls.push(`health ${id}`);
    return HEALTH;
  }
  async stacks(id: string) {
    this.calls.push(`stacks ${id}`);
    return { summary: 's', text: 'rank 1 in wait_for_data', path: '/p' };
  }
  async checkpoint(id: string): Promise<never> {
    this.calls.push(`checkpoint ${id}`);
    throw new Error(
      'job 0a1b2c3d cannot save on request: its ranks run no nbtoolkit Trainer callback'
    );
  }
  async fork(id: string, settings: string[]) {
    this.calls.push(`fork ${id} ${settings.join(' ')}`);
    return {
      id: 'feedbeef',
      name: 'x-fork',
      message: 'job feedbeef forked from job 0a1b2c3d'
    };
  }
}

describe('the run doctor in the detail view', () => {
  let container: HTMLDivElement;
  let root: Root;
  beforeEach(() => {
    container = document.createElement('div');
    document.body.appendChild(container);
    root = createRoot(container);
  });
  afterEach(() => {
    act(() => root.unmount());
    container.remove();
  });

  it('shows one row per rank with the straggler marked, and the buttons answer below', async () => {
    const api = new FakeDoctor();
    await act(async () =>
      root.render(<RunDoctor jobId="0a1b2c3d" api={api} />)
    );
    const rows = [...container.querySelectorAll('tbody tr')];
    expect(rows.map(row => row.className)).toEqual(['', 'nbt-mod-slow']);
    expect(
      [...rows[1].querySelectorAll('td')].map(cell => cell.textContent)
    ).toEqual([
      '1',
      '40',
      '0.25 s ago',
      '0.5 s',
      '2048 MiB device',
      'node1 / 101',
      'slow'
    ]);
    const button = (label: string) =>
      [...container.querySelectorAll('button')].find(
        b => b.textContent === label
      )!;
    await act(async () => button('Stacks').click());
    expect(container.querySelector('.nbt-RunDoctor-answer')!.textContent).toBe(
      'rank 1 in wait_for_data'
    );
    await act(async () => button('Checkpoint now').click());
    expect(
      container.querySelector('.nbt-RunDoctor-answer')!.textContent
    ).toContain('cannot save on request');
    expect(api.calls).toContain('stacks 0a1b2c3d');
  });
});

describe('notifications', () => {
  it('announce a finish, a failure, a stall and a budget stop once, and nothing of old jobs', () => {
    const seen = new Map<string, ISeen>();
    const old = job({
      id: 'old00000',
      status: 'succeeded',
      active: false,
      created: 10
    });
    expect(
      jobEvents(seen, [old, job({ id: 'a' }), job({ id: 'b' })], 500)
    ).toEqual([]);
    const stalled = job({ id: 'a', health_state: 'stalled' });
    const failed = job({
      id: 'b',
      status: 'failed',
      active: false,
      message: 'exited with code 1'
    });
    const events = jobEvents(seen, [old, stalled, failed], 500);
    expect(events.map(e => [e.kind, e.job.id])).toEqual([
      ['warning', 'a'],
      ['error', 'b']
    ]);
    expect(events[1].message).toBe(
      'job emotion-bert failed: exited with code 1'
    );
    expect(jobEvents(seen, [old, stalled, failed], 500)).toEqual([]);
    const budget = {
      reached: 'stopped',
      cost_usd: 0.1,
      budget_usd: 0.1,
      step: 12,
      time: 1,
      kind: 'budget',
      summary: '$0.10 of the $0.10 budget spent (100%) at step 12'
    };
    const stopped = job({ id: 'a', status: 'stopped', active: false, budget });
    const done = job({
      id: 'c',
      status: 'succeeded',
      active: false,
      created: 900
    });
    const learnedNothing = job({
      id: 'd',
      status: 'succeeded',
      active: false,
      created: 900,
      warning:
        'learned nothing: the reward is NaN or infinite at every logging step since step 10'
    });
    const events2 = jobEvents(seen, [stopped, done, learnedNothing], 500);
    expect(events2.map(e => [e.kind, e.message])).toEqual([
      [
        'warning',
        'job emotion-bert hit its budget: $0.10 of the $0.10 budget spent (100%) at step 12'
      ],
      ['success', 'job emotion-bert succeeded'],
      [
        'warning',
        'job emotion-bert succeeded, but learned nothing: the reward is NaN or infinite at every logging step since step 10'
      ]
    ]);
  });
});
