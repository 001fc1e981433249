/**
 * The nbtoolkit JupyterLab extension: a left-sidebar panel with every fine-tuning job.
 * Plugin wiring only; see model.ts (state), handler.ts (REST client), components/ and widgets/.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { addCommands, CommandIDs } from './commands';
import { JobsClient } from './handler';
import { DEFAULT_REFRESH, JobsModel } from './model';
import { watchJobs } from './notifications';
import { JobsPanel } from './widgets/JobsPanel';

const PLUGIN_ID = 'nbtoolkit:plugin';

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description:
    'Every nbtoolkit fine-tuning job in the left sidebar: progress, loss, log, stop.',
  autoStart: true,
  optional: [
    ISettingRegistry,
    INotebookTracker,
    ILayoutRestorer,
    ICommandPalette
  ],
  activate: (
    app: JupyterFrontEnd,
    settingRegistry: ISettingRegistry | null,
    tracker: INotebookTracker | null,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null
  ) => {
    const api = new JobsClient();
    const model = new JobsModel(api);
    const panel = new JobsPanel(model, addCommands(app, api, model, tracker));
    watchJobs(model, Notification, job =>
      app.commands.execute(CommandIDs.open, { id: job.id, name: job.name })
    );
    app.shell.add(panel, 'left', { rank: 600 });
    restorer?.add(panel, panel.id);
    palette?.addItem({ command: CommandIDs.refresh, category: 'nbtoolkit' });

    if (settingRegistry) {
      void settingRegistry.load(PLUGIN_ID).then(settings => {
        const read = () =>
          model.updateSettings({
            interval:
              1000 *
              ((settings.get('refreshInterval').composite as number) ??
                DEFAULT_REFRESH.interval / 1000),
            idleInterval:
              1000 *
              ((settings.get('idleInterval').composite as number) ??
                DEFAULT_REFRESH.idleInterval / 1000)
          });
        read();
        settings.changed.connect(read);
      });
    }
    model.start();
  }
};

export default plugin;
