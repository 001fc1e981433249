/**
 * The run doctor in a job's detail view: its health, one row per rank (step, last step ago, step time,
 * memory) with slow or stalled ranks marked, refreshed while the job runs, and the Stacks, Checkpoint now
 * and Fork buttons; each answer (or the server's one sentence why not) shows below them.
 */
import React, { useEffect, useState } from 'react';

import { IDoctorAPI, IJobHealth, IRankHealth } from '../doctor';

/** How often a running job's health is read again, in milliseconds. */
export const HEALTH_INTERVAL = 3000;

function seconds(value: number | null, digits = 3): string {
  return value === null || value === undefined
    ? ''
    : `${Number(value.toPrecision(digits))} s`;
}

function mark(rank: IRankHealth): string {
  return rank.stalled ? 'stalled' : rank.slow ? 'slow' : '';
}

export function RankTable(props: { health: IJobHealth }): JSX.Element {
  const { health } = props;
  return (
    <div className="nbt-RunDoctor-health">
      <div>
        <span className={`nbt-RunDoctor-state nbt-mod-${health.state}`}>
          {health.state}
        </span>{' '}
        {health.reason}
      </div>
      {health.training.map(text => (
        <div key={text} className="nbt-JobRow-budget nbt-RunDoctor-training">
          {text}
        </div>
      ))}
      {health.ranks.length > 0 && (
        <table className="nbt-RunDoctor-ranks">
          <thead>
            <tr>
              <th>rank</th>
              <th>step</th>
              <th>last step</th>
              <th>step time</th>
              <th>memory</th>
              <th>host / pid</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {health.ranks.map(rank => (
              <tr
                key={rank.rank}
                className={mark(rank) ? `nbt-mod-${mark(rank)}` : undefined}
              >
                <td>{rank.rank}</td>
                <td>{rank.step ?? ''}</td>
                <td>{seconds(rank.last_step_ago, 2)} ago</td>
                <td>{seconds(rank.step_time)}</td>
                <td>
                  {rank.memory_mb === null
                    ? ''
                    : `${Math.round(rank.memory_mb)} MiB ${rank.memory_kind ?? ''}`}
                </td>
                <td>{`${rank.host ?? ''} / ${rank.pid ?? ''}`}</td>
                <td>{mark(rank) || (rank.alive === false ? 'exited' : '')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

export function RunDoctor(props: {
  jobId: string;
  api: IDoctorAPI;
}): JSX.Element {
  const { jobId, api } = props;
  const [health, setHealth] = useState<IJobHealth | null>(null);
  const [answer, setAnswer] = useState('');
  const [settings, setSettings] = useState('');

  useEffect(() => {
    let live = true;
    const read = () =>
      api.health(jobId).then(
        found => live && setHealth(found),
        error => live && setAnswer(String(error.message ?? error))
      );
    void read();
    const timer = setInterval(read, HEALTH_INTERVAL);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [jobId, api]);

  const act = (call: () => Promise<string>) => () => {
    setAnswer('…');
    call().then(setAnswer, error => setAnswer(String(error.message ?? error)));
  };
  return (
    <section className="nbt-RunDoctor">
      {health && <RankTable health={health} />}
      <div className="nbt-RunDoctor-actions">
        <button
          className="jp-mod-styled"
          onClick={act(async () => (await api.stacks(jobId)).text)}
        >
          Stacks
        </button>
        <button
          className="jp-mod-styled"
          onClick={act(async () => (await api.checkpoint(jobId)).message)}
        >
          Checkpoint now
        </button>
        <input
          className="nbt-RunDoctor-settings"
          placeholder="train.learning_rate=1e-4 max_steps=200"
          value={settings}
          onChange={event => setSettings(event.target.value)}
        />
        <button
          className="jp-mod-styled"
          onClick={act(
            async () =>
              (await api.fork(jobId, settings.split(/\s+/).filter(Boolean)))
                .message
          )}
        >
          Fork
        </button>
      </div>
      {answer && <pre className="nbt-RunDoctor-answer">{answer}</pre>}
    </section>
  );
}
