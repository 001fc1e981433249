/**
 * One job in the sidebar list: what runs, how far it is, how it goes, and what can be done with it.
 */
import React from 'react';

import { IJobSummary } from '../handler';
import { progressFraction } from '../model';
import { Sparkline } from './LineChart';

/** What a row's buttons do; the plugin supplies them (commands, dialogs). */
export interface IJobActions {
  open(job: IJobSummary): void;
  openLog(job: IJobSummary): void;
  insertCell(job: IJobSummary): void;
  stop(job: IJobSummary): void;
}

/** The measures a row shows after its progress bar, from the server's display strings. */
export function rowFacts(job: IJobSummary): string[] {
  const shown = job.display;
  const facts: string[] = [];
  if (shown.loss) {
    facts.push(`loss ${shown.loss}`);
  }
  if (shown.reward) {
    // a grpo job: its progress is its mean reward (its loss stays near 0)
    facts.push(`reward ${shown.reward}`);
  }
  if (shown['samples/s']) {
    facts.push(`${shown['samples/s']} samples/s`);
  }
  if (shown.elapsed) {
    facts.push(`${shown.elapsed} elapsed`);
  }
  if (shown.remaining) {
    facts.push(`${shown.remaining} left`);
  }
  if (shown.cost) {
    facts.push(
      shown.projected
        ? `${shown.cost} so far, ~${shown.projected} in all`
        : shown.cost
    );
  }
  return facts;
}

/** A running job past 90% of its budget says so (one that stopped at it says why in its message). */
export function budgetWarning(job: IJobSummary): string | null {
  const budget = job.budget;
  if (!budget || budget.reached !== 'warning' || !job.active) {
    return null;
  }
  return `budget: ${budget.summary}; it stops with a checkpoint at 100%`;
}

export function BudgetWarning(props: { job: IJobSummary }): JSX.Element | null {
  const warning = budgetWarning(props.job);
  return warning ? (
    <div className="nbt-JobRow-budget" role="status">
      {warning}
    </div>
  ) : null;
}

/** An ended job whose numbers say it learned nothing says so beside its status (the run doctor's anomalies). */
export function TrainingWarning(props: {
  job: IJobSummary;
}): JSX.Element | null {
  return props.job.warning ? (
    <div className="nbt-JobRow-budget nbt-JobRow-warning" role="status">
      {props.job.warning}
    </div>
  ) : null;
}

/** A running server job (`nbtoolkit serve`) shows the base URL an OpenAI client takes. */
export function ServerAddress(props: { job: IJobSummary }): JSX.Element | null {
  const url = props.job.url;
  return url ? (
    <div className="nbt-JobRow-facts nbt-JobRow-url">
      serving at{' '}
      <a href={url} target="_blank" rel="noreferrer">
        {url}
      </a>
    </div>
  ) : null;
}

export function ProgressBar(props: { job: IJobSummary }): JSX.Element {
  const fraction = progressFraction(props.job);
  const label = props.job.display.progress || 'no steps yet';
  return (
    <div className="nbt-Progress" title={label}>
      <div
        className="nbt-Progress-bar"
        role="progressbar"
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={
          fraction === null ? undefined : Math.round(fraction * 100)
        }
      >
        <div
          className="nbt-Progress-fill"
          style={{ width: `${(fraction ?? 0) * 100}%` }}
        />
      </div>
      <span className="nbt-Progress-label">{label}</span>
    </div>
  );
}

export function JobRow(props: {
  job: IJobSummary;
  actions: IJobActions;
}): JSX.Element {
  const { job, actions } = props;
  const facts = rowFacts(job);
  return (
    <li className={`nbt-JobRow nbt-mod-${job.status}`} data-job-id={job.id}>
      <div className="nbt-JobRow-head">
        <button
          className="nbt-JobRow-name"
          title={`${job.name} (${job.id}): open charts and log`}
          onClick={() => actions.open(job)}
        >
          {job.name}
        </button>
        <Sparkline values={job.loss_series} />
      </div>
      <div className="nbt-JobRow-line">
        <span className={`nbt-JobRow-status nbt-mod-${job.status}`}>
          {job.display.status}
        </span>
        <span className="nbt-JobRow-launcher" title="launcher">
          {job.backend}
        </span>
        <span className="nbt-JobRow-id">{job.id}</span>
      </div>
      <ProgressBar job={job} />
      {facts.length > 0 && (
        <div className="nbt-JobRow-facts">{facts.join(' · ')}</div>
      )}
      <ServerAddress job={job} />
      <BudgetWarning job={job} />
      <TrainingWarning job={job} />
      {job.message && !job.active && job.status !== 'succeeded' && (
        <div className="nbt-JobRow-message">{job.message}</div>
      )}
      <div className="nbt-JobRow-actions">
        {job.active && (
          <button
            className="nbt-Button nbt-mod-warn"
            title="Stop job"
            onClick={() => actions.stop(job)}
          >
            Stop
          </button>
        )}
        <button
          className="nbt-Button"
          title="Open log"
          onClick={() => actions.openLog(job)}
        >
          Log
        </button>
        <button
          className="nbt-Button"
          title={`Insert a %job ${job.id} cell into the active notebook`}
          onClick={() => actions.insertCell(job)}
        >
          %job
        </button>
      </div>
    </li>
  );
}
