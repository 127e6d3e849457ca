import { adminViews } from './admin';
import { resourceBrowser } from './resources';
import { currentToken, signIn, smartConfiguration, useToken } from './session';
import { terminologyBrowser } from './terminology';
import { byId } from './dom';

/** The console page: session (token), tabs, the terminology and resource browsers, the administrators' views. */
function main(): void {
  const state = byId('session-state');
  const tokenInput = byId<HTMLInputElement>('token');
  const showState = () => {
    state.textContent = currentToken() ? 'Token set' : 'No token';
  };
  byId<HTMLFormElement>('session').addEventListener('submit', (event) => {
    event.preventDefault();
    useToken(tokenInput.value.trim() || undefined);
    tokenInput.value = '';
    showState();
  });
  byId('forget').addEventListener('click', () => {
    useToken(undefined);
    showState();
  });
  showState();
  void smartConfiguration().then((config) => {
    if (!config) return;
    const login = byId('login');
    const form = byId<HTMLFormElement>('signin');
    const problem = byId('signin-problem');
    login.hidden = false;
    login.addEventListener('click', () => {
      form.hidden = !form.hidden;
    });
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const data = new FormData(form);
      problem.textContent = '';
      signIn(config, String(data.get('email') ?? ''), String(data.get('password') ?? '')).then(
        () => {
          form.reset();
          form.hidden = true;
          state.textContent = 'Signed in';
        },
        (err: unknown) => {
          problem.textContent = (err as Error).message;
        },
      );
    });
  });

  for (const tab of document.querySelectorAll<HTMLButtonElement>('.tab')) {
    tab.addEventListener('click', () => {
      for (const other of document.querySelectorAll<HTMLButtonElement>('.tab')) {
        const selected = other === tab;
        other.setAttribute('aria-selected', String(selected));
        byId(other.dataset.tab ?? '').hidden = !selected;
      }
    });
  }
  terminologyBrowser();
  resourceBrowser();
  adminViews();
}

main();
